/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * misuse.c — the misuse matrix: every exported function x every bad input that applies, each
 * checked against the documented answer (include/queuekit.h). Misuse must never crash or
 * corrupt: ctest runs this under AddressSanitizer + UBSan (a -DQK_SANITIZE=address build) and
 * valgrind (ctest -T memcheck) too.
 *
 *   misuse [--no-abort-tests]   prints the number of bad inputs tried; exits non-zero on any
 *                               mismatch. --no-abort-tests skips the forked *_precondition
 *                               children (for a memory checker that would report the memory a
 *                               child still holds when it aborts; ctest's memcheck instead runs
 *                               valgrind with --child-silent-after-fork=yes)
 *
 * Bad inputs: a NULL handle; a handle of each other QueueKit type (queue, DB queue, condition
 * lock, and a DB queue's identity-only queue); a foreign pointer (a zeroed struct that is no
 * QueueKit object); a NULL function or key; out-of-range enums; NULL and too-small buffers;
 * unlocking by a thread that does not hold the lock; locking again by the holder; destroying
 * while in use (a held lock, a waited-on lock, a DB queue from inside its own blocks); the
 * *_precondition calls, which must abort with one line (checked in child processes).
 * A destroyed handle is not tried: the header says its use is undefined (detected on a
 * best-effort basis only), so no answer is promised for it.
 */
#include "reliability.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

static int tried, failures;
static const char *bad_case = ""; /* which bad handle the current check uses */
static atomic_int ran;            /* how many times any work ran */

static void report(const char *file, int line, const char *call, long long got, long long want) {
    failures++;
    fprintf(stderr, "%s:%d: [%s] %s returned %lld, expected %lld\n", file, line, bad_case, call,
            got, want);
}

/* One bad input: `call` must return `want`. */
#define EXPECT(call, want)                                                                         \
    do {                                                                                           \
        long long got_ = (long long)(call), want_ = (long long)(want);                             \
        tried++;                                                                                   \
        if (got_ != want_) report(__FILE__, __LINE__, #call, got_, want_);                         \
    } while (0)

/* A check that is part of a scenario (not counted as a bad input). */
#define CHECK(condition)                                                                           \
    do {                                                                                           \
        if (!(condition)) report(__FILE__, __LINE__, #condition, 0, 1);                            \
    } while (0)

/* A constructor's failure: NULL with errno `code`. */
#define EXPECT_NULL_ERRNO(call, code)                                                              \
    do {                                                                                           \
        errno = 0;                                                                                 \
        const void *result_ = (call);                                                              \
        tried++;                                                                                   \
        if (result_ != NULL || errno != (code)) report(__FILE__, __LINE__, #call, errno, code);    \
    } while (0)

static void work(void *context) {
    (void)context;
    atomic_fetch_add(&ran, 1);
}

static void nothing(void *context) {
    (void)context;
}

/* ---- the handles ---------------------------------------------------------------------------- */

static qk_queue_t *serial, *concurrent, *identity;
static qk_dbqueue_t *db;
static qk_condlock_t *lock;
static struct { uint64_t words[8]; } foreign; /* no QueueKit object: its first word is 0 */
static struct { uint64_t words[8]; } garbage; /* first word is a random-looking value */

struct bad {
    const char *name;
    void *handle;
};

/* ---- 1. every function x wrong handles -------------------------------------------------- */

static void queue_functions(void) {
    struct bad bads[] = {
        {"NULL", NULL},
        {"DB queue handle", db},
        {"condlock handle", lock},
        {"foreign pointer", &foreign},
        {"garbage pointer", &garbage},
    };
    int key;
    for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++) {
        qk_queue_t *q = bads[i].handle;
        bad_case = bads[i].name;
        EXPECT(qk_queue_async(q, NULL, work), EINVAL);
        EXPECT(qk_queue_sync(q, NULL, work), EINVAL);
        EXPECT(qk_queue_barrier_async(q, NULL, work), EINVAL);
        EXPECT(qk_queue_barrier_sync(q, NULL, work), EINVAL);
        EXPECT(qk_queue_perform(q, NULL, work), EINVAL);
        EXPECT(qk_queue_check(q, QK_ON_QUEUE), EINVAL);
        EXPECT(qk_queue_check(q, QK_NOT_ON_QUEUE), EINVAL);
        EXPECT(qk_queue_set_specific(q, &key, &key, NULL), EINVAL);
        EXPECT(qk_queue_get_specific(q, &key) == NULL, 1);
        EXPECT(qk_queue_is_current(q), false);
        EXPECT(strcmp(qk_queue_label(q), ""), 0);
        EXPECT(qk_queue_retain(q) == q, 1); /* a no-op that returns its argument */
        qk_queue_release(q);                /* a no-op */
        tried++;
        if (q != NULL)
            EXPECT_NULL_ERRNO(qk_queue_create_with_target("t", QK_QUEUE_SERIAL, q), EINVAL);
    }
    /* NULL target is documented as qk_queue_create: not an error */
    qk_queue_t *plain = qk_queue_create_with_target("plain", QK_QUEUE_SERIAL, NULL);
    CHECK(plain != NULL);
    qk_queue_release(plain);

    /* the DB queue's identity queue: identity calls work, submitting work is EINVAL */
    bad_case = "identity-only queue";
    EXPECT(qk_queue_async(identity, NULL, work), EINVAL);
    EXPECT(qk_queue_sync(identity, NULL, work), EINVAL);
    EXPECT(qk_queue_barrier_async(identity, NULL, work), EINVAL);
    EXPECT(qk_queue_barrier_sync(identity, NULL, work), EINVAL);
    EXPECT(qk_queue_perform(identity, NULL, work), EINVAL);
    EXPECT_NULL_ERRNO(qk_queue_create_with_target("t", QK_QUEUE_SERIAL, identity), EINVAL);
    EXPECT(qk_queue_check(identity, QK_NOT_ON_QUEUE), 0);
    CHECK(atomic_load(&ran) == 0);
}

static void dbqueue_functions(void) {
    struct bad bads[] = {
        {"NULL", NULL},
        {"queue handle", serial},
        {"condlock handle", lock},
        {"identity-only queue", identity},
        {"foreign pointer", &foreign},
        {"garbage pointer", &garbage},
    };
    for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++) {
        qk_dbqueue_t *d = bads[i].handle;
        bad_case = bads[i].name;
        EXPECT(qk_dbqueue_read(d, NULL, work), EINVAL);
        EXPECT(qk_dbqueue_write(d, NULL, work), EINVAL);
        EXPECT(qk_dbqueue_write_async(d, NULL, work), EINVAL);
        EXPECT(qk_dbqueue_flush(d), EINVAL);
        EXPECT(qk_dbqueue_destroy(d), EINVAL);
        EXPECT_NULL_ERRNO(qk_dbqueue_queue(d), EINVAL);
    }
    CHECK(atomic_load(&ran) == 0);
}

static bool accept_any(intptr_t condition, void *context) {
    (void)condition;
    (void)context;
    return true;
}

static void condlock_functions(void) {
    struct bad bads[] = {
        {"NULL", NULL},
        {"queue handle", serial},
        {"DB queue handle", db},
        {"identity-only queue", identity},
        {"foreign pointer", &foreign},
        {"garbage pointer", &garbage},
    };
    for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++) {
        qk_condlock_t *l = bads[i].handle;
        qk_condlock_stats_t stats = {.size = sizeof stats};
        bad_case = bads[i].name;
        EXPECT(qk_condlock_destroy(l), EINVAL);
        EXPECT(qk_condlock_lock(l), EINVAL);
        EXPECT(qk_condlock_trylock(l), EINVAL);
        EXPECT(qk_condlock_lock_until(l, qk_now_ns()), EINVAL);
        EXPECT(qk_condlock_lock_when(l, 0), EINVAL);
        EXPECT(qk_condlock_trylock_when(l, 0), EINVAL);
        EXPECT(qk_condlock_lock_when_until(l, 0, QK_FOREVER), EINVAL);
        EXPECT(qk_condlock_unlock(l), EINVAL);
        EXPECT(qk_condlock_unlock_with(l, 1), EINVAL);
        EXPECT(qk_condlock_set(l, 1), EINVAL);
        EXPECT(qk_condlock_condition(l), 0);
        EXPECT(qk_condlock_set_name(l, "x"), EINVAL);
        EXPECT(strcmp(qk_condlock_name(l), ""), 0);
        EXPECT(qk_condlock_get_stats(l, &stats), EINVAL);
        EXPECT(qk_condlock_lock_if(l, accept_any, NULL), EINVAL);
        EXPECT(qk_condlock_trylock_if(l, accept_any, NULL), EINVAL);
        EXPECT(qk_condlock_lock_if_until(l, accept_any, NULL, qk_now_ns()), EINVAL);
        EXPECT(qk_condlock_await(l, accept_any, NULL), EINVAL);
        EXPECT(qk_condlock_await_until(l, accept_any, NULL, QK_FOREVER), EINVAL);
    }
}

/* ---- 2. NULL functions and keys, out-of-range enums, buffers ---------------------------- */

static void null_functions_and_keys(void) {
    bad_case = "NULL function";
    {
        qk_condlock_t *l = qk_condlock_create(0);
        CHECK(l != NULL);
        EXPECT(qk_condlock_lock_if(l, NULL, NULL), EINVAL);
        EXPECT(qk_condlock_trylock_if(l, NULL, NULL), EINVAL);
        EXPECT(qk_condlock_lock_if_until(l, NULL, NULL, QK_FOREVER), EINVAL);
        EXPECT(qk_condlock_await(l, NULL, NULL), EINVAL);
        EXPECT(qk_condlock_await_until(l, NULL, NULL, QK_FOREVER), EINVAL);
        EXPECT(qk_condlock_await(l, accept_any, NULL), EPERM); /* not the holder */
        EXPECT(qk_condlock_destroy(l), 0);
    }
    qk_queue_t *queues[] = {serial, concurrent, qk_queue_main(), qk_queue_global(QK_QOS_DEFAULT)};
    for (size_t i = 0; i < sizeof queues / sizeof queues[0]; i++) {
        EXPECT(qk_queue_async(queues[i], NULL, NULL), EINVAL);
        EXPECT(qk_queue_sync(queues[i], NULL, NULL), EINVAL);
        EXPECT(qk_queue_barrier_async(queues[i], NULL, NULL), EINVAL);
        EXPECT(qk_queue_barrier_sync(queues[i], NULL, NULL), EINVAL);
        EXPECT(qk_queue_perform(queues[i], NULL, NULL), EINVAL);
    }
    EXPECT(qk_dbqueue_read(db, NULL, NULL), EINVAL);
    EXPECT(qk_dbqueue_write(db, NULL, NULL), EINVAL);
    EXPECT(qk_dbqueue_write_async(db, NULL, NULL), EINVAL);

    bad_case = "NULL key";
    EXPECT(qk_queue_set_specific(serial, NULL, &tried, NULL), EINVAL);
    EXPECT(qk_queue_set_specific(serial, NULL, NULL, nothing), EINVAL);
    EXPECT(qk_queue_get_specific(serial, NULL) == NULL, 1);
    EXPECT(qk_get_specific(NULL) == NULL, 1);
    EXPECT(qk_queue_get_specific(NULL, NULL) == NULL, 1);
}

static void out_of_range_enums(void) {
    bad_case = "out-of-range enum";
    int bad_values[] = {-1, 3, 5, 99, INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof bad_values / sizeof bad_values[0]; i++) {
        int v = bad_values[i];
        if (v != 3 && v != 5) { /* 3 and 5 are out of range for predicate and qos only */
            EXPECT_NULL_ERRNO(qk_queue_create("k", (qk_queue_kind_t)v), EINVAL);
            EXPECT_NULL_ERRNO(qk_queue_create_with_target("k", (qk_queue_kind_t)v, serial), EINVAL);
        }
        if (v != 3) EXPECT_NULL_ERRNO(qk_queue_global((qk_qos_t)v), EINVAL);
        EXPECT(qk_queue_check(serial, (qk_predicate_t)v), EINVAL);
    }
    EXPECT_NULL_ERRNO(qk_queue_create("k", (qk_queue_kind_t)2), EINVAL);
}

static void buffers(void) {
    bad_case = "buffer";
    /* on the main thread outside any block the main queue is current */
    size_t length = strlen(qk_queue_label(qk_queue_main()));
    CHECK(length > 0);
    char buffer[8];
    EXPECT(qk_queue_copy_current_label(NULL, 0), length); /* measuring */
    memset(buffer, 'x', sizeof buffer);
    EXPECT(qk_queue_copy_current_label(buffer, 0), length); /* zero size: nothing written */
    EXPECT(buffer[0], 'x');
    EXPECT(qk_queue_copy_current_label(buffer, 1), length); /* room for the NUL only */
    EXPECT(buffer[0], '\0');
    EXPECT(buffer[1], 'x');
    EXPECT(qk_queue_copy_current_label(buffer, 4), length); /* truncated, terminated */
    EXPECT(strlen(buffer), length < 3 ? length : 3);

    qk_condlock_stats_t stats;
    EXPECT(qk_condlock_get_stats(lock, NULL), EINVAL);
    stats.size = 0;
    EXPECT(qk_condlock_get_stats(lock, &stats), EINVAL);
    stats.size = sizeof stats.size; /* no room for acquisitions */
    EXPECT(qk_condlock_get_stats(lock, &stats), EINVAL);
    stats.size = offsetof(qk_condlock_stats_t, acquisitions) + sizeof stats.acquisitions - 1;
    EXPECT(qk_condlock_get_stats(lock, &stats), EINVAL);
    /* an older, shorter struct: only the fields that fit are written */
    memset(&stats, 0xAB, sizeof stats);
    stats.size = offsetof(qk_condlock_stats_t, contended);
    EXPECT(qk_condlock_get_stats(lock, &stats), 0);
    EXPECT(stats.contended, 0xABABABABABABABABull);
    EXPECT(stats.timeouts, 0xABABABABABABABABull);
    /* a newer, longer struct: the known fields, nothing past them */
    struct {
        qk_condlock_stats_t stats;
        uint64_t canary;
    } longer;
    memset(&longer, 0xCD, sizeof longer);
    longer.stats.size = sizeof longer;
    EXPECT(qk_condlock_get_stats(lock, &longer.stats), 0);
    EXPECT(longer.canary, 0xCDCDCDCDCDCDCDCDull);
    longer.stats.size = SIZE_MAX;
    EXPECT(qk_condlock_get_stats(lock, &longer.stats), 0);
    EXPECT(longer.canary, 0xCDCDCDCDCDCDCDCDull);

    /* names: NULL clears; strerror of anything is a static non-NULL string */
    EXPECT(qk_condlock_set_name(lock, "named"), 0);
    EXPECT(qk_condlock_set_name(lock, NULL), 0);
    EXPECT(strcmp(qk_condlock_name(lock), ""), 0);
    int statuses[] = {0,     -1,        INT_MIN, INT_MAX, 9999,  EINVAL,
                      EBUSY, ETIMEDOUT, EPERM,   EDEADLK, ENOMEM};
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++) {
        const char *text = qk_strerror(statuses[i]);
        EXPECT(text != NULL && text[0] != '\0', 1);
    }
}

/* ---- 3. ownership: non-owners, holders, destroy while in use ---------------------------- */

struct lock_call {
    qk_condlock_t *lock;
    int (*call)(struct lock_call *);
    int status;
    intptr_t value;
};

static void *on_thread(void *argument) {
    struct lock_call *c = argument;
    c->status = c->call(c);
    return NULL;
}

/* Runs c->call on another thread and returns its status. */
static int elsewhere(struct lock_call *c) {
    pthread_t thread;
    pthread_create(&thread, NULL, on_thread, c);
    pthread_join(thread, NULL);
    return c->status;
}

static int call_unlock(struct lock_call *c) {
    return qk_condlock_unlock(c->lock);
}
static int call_unlock_with(struct lock_call *c) {
    return qk_condlock_unlock_with(c->lock, c->value);
}
static int call_trylock(struct lock_call *c) {
    return qk_condlock_trylock(c->lock);
}
static int call_destroy(struct lock_call *c) {
    return qk_condlock_destroy(c->lock);
}
static int call_lock_past(struct lock_call *c) {
    return qk_condlock_lock_until(c->lock, 0);
}
static int call_lock_when(struct lock_call *c) {
    int status = qk_condlock_lock_when(c->lock, c->value);
    return status == 0 ? qk_condlock_unlock(c->lock) : status;
}

static void ownership(void) {
    qk_condlock_t *l = qk_condlock_create(0);
    CHECK(l != NULL);

    bad_case = "unlock of an unheld lock";
    EXPECT(qk_condlock_unlock(l), EPERM);
    EXPECT(qk_condlock_unlock_with(l, 5), EPERM);
    EXPECT(qk_condlock_condition(l), 0); /* nothing changed */

    CHECK(qk_condlock_lock(l) == 0);
    bad_case = "relock by the holder";
    EXPECT(qk_condlock_lock(l), EDEADLK);
    EXPECT(qk_condlock_lock_until(l, QK_FOREVER), EDEADLK);
    EXPECT(qk_condlock_lock_until(l, 0), EDEADLK);
    EXPECT(qk_condlock_lock_when(l, 0), EDEADLK);
    EXPECT(qk_condlock_lock_when_until(l, 0, qk_now_ns() + 1000000), EDEADLK);
    EXPECT(qk_condlock_set(l, 3), EDEADLK);
    EXPECT(qk_condlock_trylock(l), EBUSY);
    EXPECT(qk_condlock_trylock_when(l, 0), EBUSY);

    bad_case = "unlock by a non-owner";
    struct lock_call c = {.lock = l, .call = call_unlock};
    EXPECT(elsewhere(&c), EPERM);
    c = (struct lock_call){.lock = l, .call = call_unlock_with, .value = 9};
    EXPECT(elsewhere(&c), EPERM);
    EXPECT(qk_condlock_condition(l), 0); /* the condition did not change */
    c = (struct lock_call){.lock = l, .call = call_trylock};
    EXPECT(elsewhere(&c), EBUSY); /* still held */
    c = (struct lock_call){.lock = l, .call = call_lock_past};
    EXPECT(elsewhere(&c), ETIMEDOUT); /* a past deadline tries once */

    bad_case = "destroy while held";
    EXPECT(qk_condlock_destroy(l), EBUSY); /* by the holder */
    c = (struct lock_call){.lock = l, .call = call_destroy};
    EXPECT(elsewhere(&c), EBUSY); /* by another thread */
    CHECK(qk_condlock_unlock(l) == 0);

    bad_case = "destroy while waited on";
    /* a thread waits for condition 7 while the lock is free with condition 0 */
    struct lock_call waiter = {.lock = l, .call = call_lock_when, .value = 7};
    pthread_t thread;
    pthread_create(&thread, NULL, on_thread, &waiter);
    /* give it time to queue (no C call tells how many wait) */
    usleep(50000);
    EXPECT(qk_condlock_destroy(l), EBUSY);
    CHECK(qk_condlock_set(l, 7) == 0); /* hands the lock to the waiter */
    pthread_join(thread, NULL);
    CHECK(waiter.status == 0);
    EXPECT(qk_condlock_lock_when_until(l, 8, 0), ETIMEDOUT); /* wrong condition, past deadline */
    EXPECT(qk_condlock_trylock_when(l, 8), EBUSY);
    CHECK(qk_condlock_destroy(l) == 0); /* idle now */
}

struct db_probe {
    qk_dbqueue_t *db;
    qk_queue_t *hop;
    int destroy, flush, write;
};

static void probe_inside(void *context) {
    struct db_probe *p = context;
    p->destroy = qk_dbqueue_destroy(p->db);
    p->flush = qk_dbqueue_flush(p->db);
    p->write = qk_dbqueue_write(p->db, NULL, work);
}

static void probe_through_hop(void *context) {
    struct db_probe *p = context;
    CHECK(qk_queue_sync(p->hop, p, probe_inside) == 0);
}

static atomic_int async_probed;
static struct db_probe async_probe;
static void probe_async(void *context) {
    probe_inside(context);
    atomic_store(&async_probed, 1);
}

static void db_in_use(void) {
    qk_dbqueue_t *d = qk_dbqueue_create("misuse.db");
    qk_queue_t *hop = qk_queue_create("misuse.hop", QK_QUEUE_SERIAL);
    struct db_probe p = {.db = d, .hop = hop};
    int before = atomic_load(&ran);

    bad_case = "DB destroy/flush inside a read";
    CHECK(qk_dbqueue_read(d, &p, probe_inside) == 0);
    EXPECT(p.destroy, EBUSY);
    EXPECT(p.flush, EDEADLK);
    EXPECT(p.write, EDEADLK); /* the forbidden upgrade */

    bad_case = "DB destroy/flush inside a write";
    CHECK(qk_dbqueue_write(d, &p, probe_inside) == 0);
    EXPECT(p.destroy, EBUSY);
    EXPECT(p.flush, EDEADLK);
    EXPECT(p.write, 0); /* inline */

    bad_case = "DB destroy/flush inside a read, through a sync hop";
    CHECK(qk_dbqueue_read(d, &p, probe_through_hop) == 0);
    EXPECT(p.destroy, EBUSY);
    EXPECT(p.flush, EDEADLK);
    EXPECT(p.write, EDEADLK);

    bad_case = "DB destroy/flush inside an async write";
    async_probe = (struct db_probe){.db = d, .hop = hop};
    CHECK(qk_dbqueue_write_async(d, &async_probe, probe_async) == 0);
    CHECK(qk_dbqueue_flush(d) == 0);
    CHECK(atomic_load(&async_probed) == 1);
    EXPECT(async_probe.destroy, EBUSY);
    EXPECT(async_probe.flush, EDEADLK);
    EXPECT(async_probe.write, 0);

    CHECK(atomic_load(&ran) == before + 2); /* the two inline writes, nothing else */
    CHECK(qk_dbqueue_destroy(d) == 0);
    qk_queue_release(hop);
}

static void main_and_global_queues(void) {
    atomic_store(&ran, 0);
    bad_case = "sync onto the main queue from the main thread";
    EXPECT(qk_queue_sync(qk_queue_main(), NULL, work), EDEADLK);
    EXPECT(qk_queue_barrier_sync(qk_queue_main(), NULL, work), EDEADLK);
    CHECK(atomic_load(&ran) == 0);
    bad_case = "releasing main and global queues";
    for (int i = 0; i < 3; i++) {
        qk_queue_release(qk_queue_main());
        qk_queue_release(qk_queue_global(QK_QOS_UTILITY));
        tried += 2;
    }
    EXPECT(qk_queue_sync(qk_queue_global(QK_QOS_UTILITY), NULL, work), 0); /* still alive */
    EXPECT(strlen(qk_queue_label(qk_queue_global(QK_QOS_UTILITY))) > 0, 1);
    EXPECT(qk_queue_check(qk_queue_main(), QK_ON_QUEUE_AS_BARRIER), 0);
    atomic_store(&ran, 0);
}

/* ---- 4. the *_precondition calls abort with one line --------------------------------------- */

struct precondition_case {
    const char *name;
    const qk_queue_t *queue;
    qk_predicate_t predicate;
};

/* Runs qk_queue_precondition in a child; true when it aborted after one line on stderr. */
static bool aborts_with_one_line(const struct precondition_case *c) {
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) return false;
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) {
        dup2(pipe_fds[1], 2);
        close(pipe_fds[0]);
        qk_queue_precondition(c->queue, c->predicate);
        _exit(0); /* returned: not an abort */
    }
    close(pipe_fds[1]);
    char output[1024];
    size_t length = 0;
    ssize_t got;
    while ((got = read(pipe_fds[0], output + length, sizeof output - 1 - length)) > 0)
        length += (size_t)got;
    close(pipe_fds[0]);
    output[length] = '\0';
    int status = 0;
    waitpid(child, &status, 0);
    int lines = 0;
    for (size_t i = 0; i < length; i++) lines += output[i] == '\n';
    bool ok = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && lines == 1;
    if (!ok) fprintf(stderr, "precondition %s: status %d, output: %s", c->name, status, output);
    return ok;
}

static void preconditions(void) {
    struct precondition_case cases[] = {
        {"NULL queue", NULL, QK_ON_QUEUE},
        {"wrong-type queue", (const qk_queue_t *)(void *)lock, QK_ON_QUEUE},
        {"foreign pointer", (const qk_queue_t *)(void *)&foreign, QK_ON_QUEUE},
        {"bad predicate", NULL, (qk_predicate_t)7},
        {"bad predicate, good queue", NULL, (qk_predicate_t)-1},
        {"not on the queue", NULL, QK_ON_QUEUE},
        {"on the queue", NULL, QK_NOT_ON_QUEUE},
    };
    cases[4].queue = serial;
    cases[5].queue = serial;
    cases[6].queue = qk_queue_main();
    bad_case = "precondition";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        EXPECT(aborts_with_one_line(&cases[i]), true);
    qk_queue_precondition(serial, QK_NOT_ON_QUEUE); /* holds: returns */
}

int main(int argc, char **argv) {
    bool abort_tests = !(argc > 1 && strcmp(argv[1], "--no-abort-tests") == 0);
    serial = qk_queue_create("misuse.serial", QK_QUEUE_SERIAL);
    concurrent = qk_queue_create("misuse.concurrent", QK_QUEUE_CONCURRENT);
    db = qk_dbqueue_create("misuse.db");
    identity = qk_dbqueue_queue(db);
    lock = qk_condlock_create(0);
    if (!serial || !concurrent || !db || !identity || !lock) {
        perror("misuse: creating the handles");
        return 1;
    }
    for (int i = 0; i < 8; i++) garbage.words[i] = 0x5EED5EED5EED5EEDull * (uint64_t)(i + 1);

    queue_functions();
    dbqueue_functions();
    condlock_functions();
    null_functions_and_keys();
    out_of_range_enums();
    buffers();
    ownership();
    db_in_use();
    main_and_global_queues();
    if (abort_tests) preconditions();

    /* the handles survived all of that */
    bad_case = "after the matrix";
    CHECK(qk_queue_sync(serial, NULL, work) == 0);
    CHECK(qk_dbqueue_write(db, NULL, work) == 0);
    CHECK(qk_condlock_lock(lock) == 0 && qk_condlock_unlock(lock) == 0);
    CHECK(atomic_load(&ran) == 2);
    CHECK(qk_condlock_destroy(lock) == 0);
    CHECK(qk_dbqueue_destroy(db) == 0);
    qk_queue_release(serial);
    qk_queue_release(concurrent);

    printf("misuse: %d bad inputs tried, %d got an answer other than the documented one\n", tried,
           failures);
    return failures == 0 ? 0 : 1;
}
