/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * libqueuekit.so as a plugin: dlopen, use every component, dlclose, three times over.
 *
 *   loader LIBRARY
 *
 * Each round loads the library with dlopen (RTLD_NOW | RTLD_LOCAL), resolves what it calls with
 * dlsym, and uses the queue registry (serial and concurrent queues, sync, async, barriers,
 * specifics, identity), the DB queue (read, write, write_async, flush), the condition lock
 * (lock_when, unlock_with, trylock, stats) and the diagnostics (wait report, deadlock and stall
 * handlers). Before dlclose it leaves a dispatch worker thread parked inside a block that waits on
 * a semaphore of this program, with a second block queued behind it; after dlclose it releases
 * the first, and the second can only run once that worker has returned into the library's
 * dispatch code and dequeued it: the library's code runs after dlclose, which is safe only
 * because the library stays resident (NODELETE), as RTLD_NOLOAD then confirms. Every wait is
 * bounded; any failure exits non-zero naming it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <queuekit.h>

static void fail(const char *what) {
    fprintf(stderr, "loader: FAIL: %s\n", what);
    exit(1);
}

static void expect(int condition, const char *what) {
    if (!condition) fail(what);
}

/* Waits at most 10 s. */
static void wait_for(sem_t *semaphore, const char *what) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 10;
    while (sem_timedwait(semaphore, &deadline) != 0) {
        if (errno == EINTR) continue;
        fail(what);
    }
}

/* The functions used, resolved from the handle of each round. */
/* clang-format off */
#define QK_FUNCTIONS(X) \
    X(qk_version_number) \
    X(qk_strerror) \
    X(qk_now_ns) \
    X(qk_queue_create) \
    X(qk_queue_release) \
    X(qk_queue_async) \
    X(qk_queue_sync) \
    X(qk_queue_barrier_async) \
    X(qk_queue_barrier_sync) \
    X(qk_queue_is_current) \
    X(qk_queue_set_specific) \
    X(qk_get_specific) \
    X(qk_queue_global) \
    X(qk_dbqueue_create) \
    X(qk_dbqueue_destroy) \
    X(qk_dbqueue_read) \
    X(qk_dbqueue_write) \
    X(qk_dbqueue_write_async) \
    X(qk_dbqueue_flush) \
    X(qk_condlock_create) \
    X(qk_condlock_destroy) \
    X(qk_condlock_lock_when) \
    X(qk_condlock_unlock_with) \
    X(qk_condlock_trylock) \
    X(qk_condlock_unlock) \
    X(qk_condlock_get_stats) \
    X(qk_copy_wait_report) \
    X(qk_set_deadlock_handler) \
    X(qk_set_stall_handler)
/* clang-format on */

static struct {
#define FIELD(name) __typeof__(&name) name;
    QK_FUNCTIONS(FIELD)
#undef FIELD
} qk;

static void resolve(void *handle) {
#define RESOLVE(name)                                                                              \
    *(void **)&qk.name = dlsym(handle, #name);                                                     \
    if (qk.name == NULL) fail("dlsym " #name);
    QK_FUNCTIONS(RESOLVE)
#undef RESOLVE
}

typedef struct {
    qk_queue_t *queue;
    int counter;
    int on_queue;
    void *specific;
    sem_t done;
} job_t;

static int key;

static void count(void *context) {
    job_t *job = context;
    job->counter++;
}

static void look_around(void *context) {
    job_t *job = context;
    job->on_queue = qk.qk_queue_is_current(job->queue);
    job->specific = qk.qk_get_specific(&key);
}

static void post(void *context) {
    sem_post(&((job_t *)context)->done);
}

typedef struct {
    sem_t entered, release, second_ran;
} parked_t;

static void park(void *context) {
    parked_t *parked = context;
    sem_post(&parked->entered);
    wait_for(&parked->release, "the parked block was never released");
}

static void second(void *context) {
    sem_post(&((parked_t *)context)->second_ran);
}

static void ignore_report(void *context, const char *report) {
    (void)context;
    (void)report;
}

static void round_trip(const char *library, int round) {
    void *handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        fprintf(stderr, "loader: dlopen: %s\n", dlerror());
        fail("dlopen");
    }
    resolve(handle);
    expect(qk.qk_version_number() == QK_VERSION_NUMBER, "qk_version_number is the header's");
    expect(strcmp(qk.qk_strerror(EDEADLK), "") != 0, "qk_strerror");
    expect(qk.qk_now_ns() > 0, "qk_now_ns");

    /* Queues: serial and concurrent, sync, async, barriers, identity and specifics. */
    job_t job = {0};
    sem_init(&job.done, 0, 0);
    qk_queue_t *serial = qk.qk_queue_create("loader.serial", QK_QUEUE_SERIAL);
    qk_queue_t *concurrent = qk.qk_queue_create("loader.concurrent", QK_QUEUE_CONCURRENT);
    expect(serial != NULL && concurrent != NULL, "qk_queue_create");
    expect(qk.qk_queue_set_specific(serial, &key, &job, NULL) == 0, "qk_queue_set_specific");
    job.queue = serial;
    for (int i = 0; i < 100; i++)
        expect(qk.qk_queue_async(serial, &job, count) == 0, "qk_queue_async");
    expect(qk.qk_queue_sync(serial, &job, look_around) == 0, "qk_queue_sync");
    expect(job.counter == 100 && job.on_queue && job.specific == &job,
           "serial queue: order, identity, specific");
    expect(qk.qk_queue_barrier_async(concurrent, &job, count) == 0, "qk_queue_barrier_async");
    expect(qk.qk_queue_barrier_sync(concurrent, &job, count) == 0, "qk_queue_barrier_sync");
    expect(job.counter == 102, "barriers ran");
    expect(qk.qk_queue_async(qk.qk_queue_global(QK_QOS_DEFAULT), &job, post) == 0, "global queue");
    wait_for(&job.done, "a block on a global queue never ran");

    /* The DB queue. */
    qk_dbqueue_t *db = qk.qk_dbqueue_create("loader.db");
    expect(db != NULL, "qk_dbqueue_create");
    job.counter = 0;
    expect(qk.qk_dbqueue_write(db, &job, count) == 0, "qk_dbqueue_write");
    for (int i = 0; i < 10; i++)
        expect(qk.qk_dbqueue_write_async(db, &job, count) == 0, "qk_dbqueue_write_async");
    expect(qk.qk_dbqueue_flush(db) == 0, "qk_dbqueue_flush");
    expect(qk.qk_dbqueue_read(db, &job, count) == 0 && job.counter == 12,
           "qk_dbqueue_read after the writes");
    expect(qk.qk_dbqueue_destroy(db) == 0, "qk_dbqueue_destroy");

    /* The condition lock. */
    qk_condlock_t *lock = qk.qk_condlock_create(1);
    expect(lock != NULL, "qk_condlock_create");
    expect(qk.qk_condlock_lock_when(lock, 1) == 0, "qk_condlock_lock_when");
    expect(qk.qk_condlock_unlock_with(lock, 2) == 0, "qk_condlock_unlock_with");
    expect(qk.qk_condlock_trylock(lock) == 0 && qk.qk_condlock_unlock(lock) == 0,
           "trylock + unlock");
    qk_condlock_stats_t stats = {.size = sizeof stats};
    expect(qk.qk_condlock_get_stats(lock, &stats) == 0 && stats.acquisitions == 2,
           "qk_condlock_get_stats");
    expect(qk.qk_condlock_destroy(lock) == 0, "qk_condlock_destroy");

    /* Diagnostics: the handlers (the stall watch starts a thread of the library's) and the report. */
    expect(qk.qk_set_deadlock_handler(ignore_report, NULL) == 0, "qk_set_deadlock_handler");
    expect(qk.qk_set_stall_handler(60ull * 1000000000u, ignore_report, NULL) == 0,
           "qk_set_stall_handler");
    expect(qk.qk_copy_wait_report(NULL, 0) == 0, "qk_copy_wait_report: nobody waits");
    expect(qk.qk_set_deadlock_handler(NULL, NULL) == 0, "qk_set_deadlock_handler(NULL)");

    /* A dispatch worker parked in a block across the dlclose, a second block queued behind it. */
    parked_t parked;
    sem_init(&parked.entered, 0, 0);
    sem_init(&parked.release, 0, 0);
    sem_init(&parked.second_ran, 0, 0);
    expect(qk.qk_queue_async(serial, &parked, park) == 0, "qk_queue_async(park)");
    expect(qk.qk_queue_async(serial, &parked, second) == 0, "qk_queue_async(second)");
    wait_for(&parked.entered, "the parked block never started");
    qk.qk_queue_release(concurrent);
    qk.qk_queue_release(serial); /* the queued blocks keep it alive */

    expect(dlclose(handle) == 0, "dlclose");
    sem_post(&parked.release);
    wait_for(&parked.second_ran, "the block queued behind the parked one never ran after dlclose");
    void *resident = dlopen(library, RTLD_NOW | RTLD_NOLOAD);
    expect(resident != NULL, "the library is still loaded after dlclose (NODELETE)");
    dlclose(resident);
    printf(
        "loader: round %d: every component used, dlclose'd, its threads still running it safely\n",
        round);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: loader LIBRARY\n");
        return 2;
    }
    for (int round = 1; round <= 3; round++) round_trip(argv[1], round);
    printf("loader: ok\n");
    return 0;
}
