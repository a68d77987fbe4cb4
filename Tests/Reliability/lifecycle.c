/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * lifecycle.c — threads that die and processes that fork (include/queuekit.h, "Threads that die
 * and processes that fork"):
 *
 *   - condition locks whose holder exits: alone, with waiters, in the middle of a chain; EOWNERDEAD
 *     exactly once, set() passing the news on, past deadlines, destroy, stats.abandonments (also
 *     read with the older, shorter stats struct);
 *   - qk_main() ends the main thread holding a lock (in a fresh process: this program re-runs
 *     itself with --qk-main);
 *   - fork() while an asynchronous write runs with more pending, a serial queue runs a block, a
 *     DB queue is being read, and condition locks are held by another thread (with a waiter) and
 *     by the forking thread: the child checks every documented answer, the parent checks it was
 *     unaffected; a child calling qk_main() aborts with one line.
 *
 *   lifecycle [--no-abort-tests] [--qk-main]
 *
 * Every wait is bounded: children run under alarm(), the parent reaps them with a deadline, and the
 * threads of this program meet through semaphores. --no-abort-tests skips the child that aborts
 * (valgrind reports the memory an aborting child still holds).
 */
#include "reliability.h"

#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static atomic_int checks, failures;

#define CHECK_EQ(call, want)                                                                       \
    do {                                                                                           \
        long long got_ = (long long)(call), want_ = (long long)(want);                             \
        checks++;                                                                                  \
        if (got_ != want_) {                                                                       \
            failures++;                                                                            \
            fprintf(stderr, "%s:%d: %s is %lld, expected %lld\n", __FILE__, __LINE__, #call, got_, \
                    want_);                                                                        \
        }                                                                                          \
    } while (0)

#define CHECK(condition) CHECK_EQ(!!(condition), 1)

/* A bound for every wait of this program on something another thread or process must do. */
enum { BOUND_SECONDS = 20 };

static uint64_t bounded(void) {
    return qk_now_ns() + (uint64_t)BOUND_SECONDS * 1000000000u;
}

static uint64_t in_ms(unsigned ms) {
    return qk_now_ns() + (uint64_t)ms * 1000000u;
}

/* Waits for `sem` at most BOUND_SECONDS; a timeout is a failure (and the test goes on). */
static void wait_for(sem_t *sem, const char *what) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += BOUND_SECONDS;
    int rc;
    while ((rc = sem_timedwait(sem, &ts)) != 0 && errno == EINTR) {}
    checks++;
    if (rc != 0) {
        failures++;
        fprintf(stderr, "timed out waiting for %s\n", what);
    }
}

static pthread_t start(void *(*body)(void *), void *argument) {
    pthread_t thread;
    if (pthread_create(&thread, NULL, body, argument) != 0) {
        fprintf(stderr, "pthread_create failed\n");
        exit(1);
    }
    return thread;
}

static qk_condlock_stats_t stats_of(qk_condlock_t *lock) {
    qk_condlock_stats_t stats = {.size = sizeof stats};
    CHECK_EQ(qk_condlock_get_stats(lock, &stats), 0);
    return stats;
}

/* ---------------------------------------------------------------------------------------- */
/* Abandoned condition locks                                                                */
/* ---------------------------------------------------------------------------------------- */

/* A thread that acquires the lock (plainly, or when the condition is `when` >= 0), optionally
 * sets the condition to `leave` without releasing, and exits holding it. */
typedef struct {
    qk_condlock_t *lock;
    intptr_t when, leave;
} dier;

static void *die_holding(void *argument) {
    dier *d = argument;
    CHECK_EQ(d->when >= 0 ? qk_condlock_lock_when(d->lock, d->when) : qk_condlock_lock(d->lock), 0);
    (void)d->leave;
    return NULL; /* exits holding the lock */
}

static void exit_holding(qk_condlock_t *lock, intptr_t when) {
    dier d = {lock, when, 0};
    pthread_join(start(die_holding, &d), NULL);
}

static void holder_exits_while_nobody_waits(void) {
    qk_condlock_t *lock = qk_condlock_create(5);
    exit_holding(lock, -1);
    CHECK(qk_condlock_condition(lock) == 5);
    CHECK_EQ(stats_of(lock).abandonments, 1);
    /* The next acquirer gets it, once, with EOWNERDEAD; then the lock is healthy. */
    CHECK_EQ(qk_condlock_trylock(lock), EOWNERDEAD);
    CHECK_EQ(qk_condlock_trylock(lock), EBUSY); /* held by us */
    CHECK_EQ(qk_condlock_unlock(lock), 0);
    CHECK_EQ(qk_condlock_lock(lock), 0);
    CHECK_EQ(qk_condlock_unlock(lock), 0);

    /* Each acquisition form reports it; a deadline already past too. */
    exit_holding(lock, -1);
    CHECK_EQ(qk_condlock_lock_until(lock, 0), EOWNERDEAD);
    CHECK_EQ(qk_condlock_unlock_with(lock, 6), 0);
    exit_holding(lock, 6);
    CHECK_EQ(qk_condlock_trylock_when(lock, 5), EBUSY); /* free, but another value */
    CHECK_EQ(qk_condlock_lock_when_until(lock, 6, 0), EOWNERDEAD);
    CHECK_EQ(qk_condlock_unlock(lock), 0);
    exit_holding(lock, -1);
    CHECK_EQ(qk_condlock_lock_when(lock, 6), EOWNERDEAD);
    CHECK_EQ(qk_condlock_unlock(lock), 0);

    /* set() takes and releases it without consuming the news. */
    exit_holding(lock, -1);
    CHECK_EQ(qk_condlock_set(lock, 9), 0);
    CHECK_EQ(qk_condlock_condition(lock), 9);
    CHECK_EQ(qk_condlock_lock(lock), EOWNERDEAD);
    CHECK_EQ(qk_condlock_unlock(lock), 0);
    CHECK_EQ(stats_of(lock).abandonments, 5);

    /* A caller built against the older stats struct (no abandonments field) is not written past. */
    struct {
        qk_condlock_stats_t old;
        uint64_t canary;
    } old_caller;
    memset(&old_caller, 0xAB, sizeof old_caller);
    old_caller.old.size = offsetof(qk_condlock_stats_t, abandonments);
    CHECK_EQ(qk_condlock_get_stats(lock, &old_caller.old), 0);
    CHECK(old_caller.old.acquisitions > 0);
    CHECK_EQ(old_caller.old.abandonments, 0xABABABABABABABABull);

    /* An abandoned lock nobody waits for can be destroyed. */
    exit_holding(lock, -1);
    CHECK_EQ(qk_condlock_destroy(lock), 0);
}

typedef struct {
    qk_condlock_t *lock;
    sem_t ready;
    int status;
} waiter;

static void *wait_and_hold(void *argument) {
    waiter *w = argument;
    sem_post(&w->ready);
    w->status = qk_condlock_lock_until(w->lock, bounded());
    if (w->status == 0 || w->status == EOWNERDEAD) CHECK_EQ(qk_condlock_unlock(w->lock), 0);
    return NULL;
}

typedef struct {
    qk_condlock_t *lock;
    sem_t locked, leave;
} gated_holder;

static void *hold_until_released(void *argument) {
    gated_holder *h = argument;
    CHECK_EQ(qk_condlock_lock(h->lock), 0);
    sem_post(&h->locked);
    wait_for(&h->leave, "the signal to exit");
    return NULL; /* exits holding the lock */
}

static void holder_exits_while_others_wait(void) {
    enum { WAITERS = 3 };
    qk_condlock_t *lock = qk_condlock_create(0);
    gated_holder h = {.lock = lock};
    sem_init(&h.locked, 0, 0);
    sem_init(&h.leave, 0, 0);
    pthread_t holder = start(hold_until_released, &h);
    wait_for(&h.locked, "the holder");
    waiter w[WAITERS];
    pthread_t threads[WAITERS];
    for (int i = 0; i < WAITERS; i++) {
        w[i] = (waiter){.lock = lock};
        sem_init(&w[i].ready, 0, 0);
        threads[i] = start(wait_and_hold, &w[i]);
        wait_for(&w[i].ready, "a waiter");
    }
    sem_post(&h.leave);
    pthread_join(holder, NULL);
    int owner_dead = 0, plain = 0;
    for (int i = 0; i < WAITERS; i++) {
        pthread_join(threads[i], NULL);
        owner_dead += w[i].status == EOWNERDEAD;
        plain += w[i].status == 0;
        sem_destroy(&w[i].ready);
    }
    /* Exactly one acquirer is told; the others get a healthy lock. */
    CHECK_EQ(owner_dead, 1);
    CHECK_EQ(plain, WAITERS - 1);
    CHECK_EQ(stats_of(lock).abandonments, 1);
    CHECK_EQ(qk_condlock_destroy(lock), 0);
    sem_destroy(&h.locked);
    sem_destroy(&h.leave);
}

/* A chain 1 -> 2 -> 3 whose middle link (waiting for 1, to leave 2) dies holding the lock. */
typedef struct {
    qk_condlock_t *lock;
    sem_t ready;
    int status;
} last_link;

static void *wait_for_two(void *argument) {
    last_link *link = argument;
    sem_post(&link->ready);
    link->status = qk_condlock_lock_when_until(link->lock, 2, bounded());
    if (link->status == 0) CHECK_EQ(qk_condlock_unlock_with(link->lock, 3), 0);
    return NULL;
}

static void chain_whose_middle_dies(void) {
    qk_condlock_t *lock = qk_condlock_create(0);
    last_link last = {.lock = lock};
    sem_init(&last.ready, 0, 0);
    pthread_t third = start(wait_for_two, &last);
    wait_for(&last.ready, "the last link");
    CHECK_EQ(qk_condlock_set(lock, 1), 0);
    exit_holding(lock, 1); /* the middle link: gets 1 and dies without leaving 2 */
    /* The last link keeps waiting for 2: nobody can be handed a lock whose condition is 1. */
    CHECK_EQ(qk_condlock_lock_when_until(lock, 2, in_ms(50)), ETIMEDOUT);
    CHECK_EQ(qk_condlock_condition(lock), 1);
    /* Recovery: whoever takes the lock learns of the death, repairs, and resumes the chain. */
    CHECK_EQ(qk_condlock_lock_when(lock, 1), EOWNERDEAD);
    CHECK_EQ(qk_condlock_unlock_with(lock, 2), 0);
    pthread_join(third, NULL);
    CHECK_EQ(last.status, 0); /* the news was consumed by the repairer */
    CHECK_EQ(qk_condlock_lock_when_until(lock, 3, bounded()), 0);
    CHECK_EQ(qk_condlock_unlock(lock), 0);
    CHECK_EQ(qk_condlock_destroy(lock), 0);
    sem_destroy(&last.ready);
}

/* ---------------------------------------------------------------------------------------- */
/* qk_main() ends the main thread: run in a fresh process                                    */
/* ---------------------------------------------------------------------------------------- */

static qk_condlock_t *main_lock;

static void *wait_for_main_lock(void *argument) {
    (void)argument;
    int status = qk_condlock_lock_until(main_lock, bounded());
    if (status != EOWNERDEAD) {
        fprintf(stderr, "after qk_main: lock returned %d, expected EOWNERDEAD\n", status);
        _exit(1);
    }
    _exit(qk_condlock_condition(main_lock) == 42 && qk_condlock_unlock(main_lock) == 0 ? 0 : 1);
}

static int qk_main_case(void) {
    alarm(BOUND_SECONDS);
    main_lock = qk_condlock_create(0);
    if (qk_condlock_lock(main_lock) != 0 || qk_condlock_unlock_with(main_lock, 42) != 0 ||
        qk_condlock_lock(main_lock) != 0)
        return 1;
    start(wait_for_main_lock, NULL);
    qk_main();
}

static void qk_main_abandons_the_main_thread_locks(const char *self) {
    pid_t child = fork();
    if (child == 0) {
        execl(self, self, "--qk-main", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    CHECK_EQ(waitpid(child, &status, 0), child);
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 0);
}

/* ---------------------------------------------------------------------------------------- */
/* fork()                                                                                   */
/* ---------------------------------------------------------------------------------------- */

enum { PENDING_WRITES = 8 };

static sem_t writing, write_gate;  /* the asynchronous write that runs at the fork */
static sem_t in_block, block_gate; /* the serial queue's block that runs at the fork */
static sem_t reading, read_gate;   /* the read that runs at the fork */
static atomic_int writes_run, blocks_run, child_ran;
static int value_written;

static void blocking_write(void *context) {
    (void)context;
    sem_post(&writing);
    wait_for(&write_gate, "the write gate");
    atomic_fetch_add(&writes_run, 1);
}

static void counted_write(void *context) {
    (void)context;
    atomic_fetch_add(&writes_run, 1);
}

static void blocking_block(void *context) {
    (void)context;
    sem_post(&in_block);
    wait_for(&block_gate, "the block gate");
    atomic_fetch_add(&blocks_run, 1);
}

static void blocking_read(void *context) {
    (void)context;
    sem_post(&reading);
    wait_for(&read_gate, "the read gate");
}

typedef struct {
    qk_dbqueue_t *db;
} reader_args;

static void *read_across_the_fork(void *argument) {
    reader_args *args = argument;
    CHECK_EQ(qk_dbqueue_read(args->db, NULL, blocking_read), 0);
    return NULL;
}

static void child_work(void *context) {
    (void)context;
    atomic_fetch_add(&child_ran, 1);
}

static void write_value(void *context) {
    value_written = *(int *)context;
}

static int read_value;
static void read_back(void *context) {
    (void)context;
    read_value = value_written;
}

/* The child's checks; returns the exit status (the number of failures, capped). */
static int in_child(qk_queue_t *serial, qk_dbqueue_t *written, qk_dbqueue_t *idle,
                    qk_dbqueue_t *being_read, qk_condlock_t *other_held, qk_condlock_t *mine) {
    alarm(BOUND_SECONDS);
    atomic_store(&failures, 0);
    int writes_before = atomic_load(&writes_run);

    /* Every submission fails at once and runs nothing. */
    CHECK_EQ(qk_queue_async(serial, NULL, child_work), ENOTRECOVERABLE);
    CHECK_EQ(qk_queue_sync(serial, NULL, child_work), ENOTRECOVERABLE);
    CHECK_EQ(qk_queue_barrier_async(serial, NULL, child_work), ENOTRECOVERABLE);
    CHECK_EQ(qk_queue_barrier_sync(serial, NULL, child_work), ENOTRECOVERABLE);
    CHECK_EQ(qk_queue_perform(serial, NULL, child_work), ENOTRECOVERABLE);
    CHECK_EQ(qk_queue_sync(qk_queue_global(QK_QOS_DEFAULT), NULL, child_work), ENOTRECOVERABLE);
    CHECK_EQ(qk_queue_async(qk_queue_main(), NULL, child_work), ENOTRECOVERABLE);
    CHECK_EQ(qk_dbqueue_write_async(idle, NULL, child_work), ENOTRECOVERABLE);
    CHECK_EQ(atomic_load(&child_ran), 0);

    /* Identity calls work. */
    CHECK(qk_queue_current() == qk_queue_main());
    CHECK_EQ(qk_queue_check(serial, QK_NOT_ON_QUEUE), 0);
    CHECK_EQ(qk_queue_check(qk_queue_main(), QK_ON_QUEUE), 0);
    CHECK(strcmp(qk_queue_label(serial), "lifecycle.serial") == 0);
    CHECK(qk_queue_get_specific(serial, &value_written) == &read_value);

    /* The DB queue being written at the fork: unusable, its pending writes never run. */
    CHECK_EQ(qk_dbqueue_read(written, NULL, read_back), ENOTRECOVERABLE);
    CHECK_EQ(qk_dbqueue_write(written, NULL, child_work), ENOTRECOVERABLE);
    CHECK_EQ(qk_dbqueue_flush(written), ENOTRECOVERABLE);
    CHECK_EQ(qk_dbqueue_destroy(written), 0);
    CHECK_EQ(atomic_load(&writes_run), writes_before);
    CHECK_EQ(atomic_load(&child_ran), 0);

    /* An idle DB queue works; one that was being read (by a thread now gone) too. */
    int value = 17;
    CHECK_EQ(qk_dbqueue_write(idle, &value, write_value), 0);
    CHECK_EQ(qk_dbqueue_read(idle, NULL, read_back), 0);
    CHECK_EQ(read_value, 17);
    CHECK_EQ(qk_dbqueue_flush(idle), 0);
    value = 18;
    CHECK_EQ(qk_dbqueue_write(being_read, &value, write_value), 0);
    CHECK_EQ(value_written, 18);
    CHECK_EQ(qk_dbqueue_flush(being_read), 0);
    CHECK_EQ(qk_dbqueue_destroy(being_read), 0);

    /* The lock another thread held is abandoned (its waiter is gone); ours is still ours. */
    CHECK_EQ(qk_condlock_lock_until(other_held, bounded()), EOWNERDEAD);
    CHECK_EQ(qk_condlock_condition(other_held), 7);
    CHECK_EQ(qk_condlock_unlock(other_held), 0);
    CHECK_EQ(qk_condlock_lock(other_held), 0);
    CHECK_EQ(qk_condlock_unlock(other_held), 0);
    CHECK_EQ(stats_of(other_held).abandonments, 1);
    CHECK_EQ(qk_condlock_destroy(other_held), 0);
    CHECK_EQ(qk_condlock_lock(mine), EDEADLK);
    CHECK_EQ(qk_condlock_unlock(mine), 0);
    CHECK_EQ(qk_condlock_lock(mine), 0);
    CHECK_EQ(qk_condlock_unlock(mine), 0);
    CHECK_EQ(stats_of(mine).abandonments, 0);
    int failed = atomic_load(&failures);
    return failed > 100 ? 100 : failed;
}

/* Waits for `child` to end, at most BOUND_SECONDS; kills it if it hangs. Returns its status. */
static int reap(pid_t child) {
    int status = 0;
    for (int i = 0; i < BOUND_SECONDS * 100; i++) {
        pid_t done = waitpid(child, &status, WNOHANG);
        if (done == child) return status;
        struct timespec tick = {0, 10 * 1000 * 1000};
        nanosleep(&tick, NULL); /* polling a child's exit: there is nothing to wait on but time */
    }
    fprintf(stderr, "the forked child hung: killing it\n");
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    return status;
}

/* Not inlined: valgrind.supp names this function (see the entry there). */
__attribute__((noinline)) static void fork_in_the_middle_of_everything(void) {
    sem_init(&writing, 0, 0);
    sem_init(&write_gate, 0, 0);
    sem_init(&in_block, 0, 0);
    sem_init(&block_gate, 0, 0);
    sem_init(&reading, 0, 0);
    sem_init(&read_gate, 0, 0);

    qk_queue_t *serial = qk_queue_create("lifecycle.serial", QK_QUEUE_SERIAL);
    CHECK_EQ(qk_queue_set_specific(serial, &value_written, &read_value, NULL), 0);
    qk_dbqueue_t *written = qk_dbqueue_create("lifecycle.written");
    qk_dbqueue_t *idle = qk_dbqueue_create("lifecycle.idle");
    qk_dbqueue_t *being_read = qk_dbqueue_create("lifecycle.read");
    qk_condlock_t *other_held = qk_condlock_create(0);
    qk_condlock_t *mine = qk_condlock_create(0);

    /* An asynchronous write runs (blocked) with more pending behind it. */
    CHECK_EQ(qk_dbqueue_write_async(written, NULL, blocking_write), 0);
    for (int i = 0; i < PENDING_WRITES; i++)
        CHECK_EQ(qk_dbqueue_write_async(written, NULL, counted_write), 0);
    wait_for(&writing, "the asynchronous write");
    /* A serial queue's block runs. */
    CHECK_EQ(qk_queue_async(serial, NULL, blocking_block), 0);
    wait_for(&in_block, "the queue block");
    /* Another thread reads. */
    reader_args args = {being_read};
    pthread_t reader = start(read_across_the_fork, &args);
    wait_for(&reading, "the read");
    /* Another thread holds a lock (condition 7) that a third waits for; we hold one. */
    gated_holder h = {.lock = other_held};
    sem_init(&h.locked, 0, 0);
    sem_init(&h.leave, 0, 0);
    CHECK_EQ(qk_condlock_set(other_held, 7), 0);
    pthread_t holder = start(hold_until_released, &h);
    wait_for(&h.locked, "the lock holder");
    waiter w = {.lock = other_held};
    sem_init(&w.ready, 0, 0);
    pthread_t waiting = start(wait_and_hold, &w);
    wait_for(&w.ready, "the lock waiter");
    CHECK_EQ(qk_condlock_lock(mine), 0);

    fflush(stdout);
    fflush(stderr);
    pid_t child = fork();
    if (child == 0) _exit(in_child(serial, written, idle, being_read, other_held, mine));
    CHECK(child > 0);
    int status = reap(child);
    CHECK(WIFEXITED(status));
    CHECK_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status), 0);

    /* The parent is unaffected: everything resumes, nothing was abandoned, nothing lost. */
    CHECK_EQ(qk_condlock_unlock(mine), 0);
    sem_post(&h.leave); /* the holder exits holding: a real abandonment, in the parent */
    pthread_join(holder, NULL);
    pthread_join(waiting, NULL);
    CHECK_EQ(w.status, EOWNERDEAD);
    CHECK_EQ(stats_of(other_held).abandonments, 1);
    sem_post(&read_gate);
    pthread_join(reader, NULL);
    sem_post(&block_gate);
    CHECK_EQ(qk_queue_sync(serial, NULL, child_work), 0);
    CHECK_EQ(atomic_load(&blocks_run), 1);
    sem_post(&write_gate);
    CHECK_EQ(qk_dbqueue_flush(written), 0);
    CHECK_EQ(atomic_load(&writes_run), 1 + PENDING_WRITES);
    CHECK_EQ(qk_dbqueue_write_async(idle, NULL, counted_write), 0);
    CHECK_EQ(qk_dbqueue_flush(idle), 0);
    CHECK_EQ(atomic_load(&writes_run), 2 + PENDING_WRITES);

    CHECK_EQ(qk_dbqueue_destroy(written), 0);
    CHECK_EQ(qk_dbqueue_destroy(idle), 0);
    CHECK_EQ(qk_dbqueue_destroy(being_read), 0);
    CHECK_EQ(qk_condlock_destroy(other_held), 0);
    CHECK_EQ(qk_condlock_destroy(mine), 0);
    qk_queue_release(serial);
    sem_destroy(&h.locked);
    sem_destroy(&h.leave);
    sem_destroy(&w.ready);
}

/* A child that calls qk_main() aborts, with one line on stderr. */
static void qk_main_in_a_child_aborts(void) {
    int pipe_ends[2];
    CHECK_EQ(pipe(pipe_ends), 0);
    fflush(stdout);
    fflush(stderr);
    pid_t child = fork();
    if (child == 0) {
        alarm(BOUND_SECONDS);
        dup2(pipe_ends[1], STDERR_FILENO);
        close(pipe_ends[0]);
        qk_main();
    }
    close(pipe_ends[1]);
    char text[512] = {0};
    size_t length = 0;
    ssize_t got;
    while (length < sizeof text - 1 &&
           (got = read(pipe_ends[0], text + length, sizeof text - 1 - length)) > 0)
        length += (size_t)got;
    close(pipe_ends[0]);
    int status = reap(child);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    CHECK(strstr(text, "forked child") != NULL);
    CHECK(length > 0 && strchr(text, '\n') == text + length - 1); /* one line */
}

int main(int argc, char **argv) {
    bool abort_tests = true;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--no-abort-tests") == 0) {
            abort_tests = false;
        } else if (strcmp(argv[i], "--qk-main") == 0) {
            return qk_main_case();
        } else {
            fprintf(stderr, "usage: %s [--no-abort-tests]\n", argv[0]);
            return 2;
        }
    }
    holder_exits_while_nobody_waits();
    holder_exits_while_others_wait();
    chain_whose_middle_dies();
    /* argv[0], not /proc/self/exe: under valgrind that is the tool's own binary. */
    qk_main_abandons_the_main_thread_locks(strchr(argv[0], '/') != NULL ? argv[0]
                                                                        : "/proc/self/exe");
    fork_in_the_middle_of_everything();
    if (abort_tests) qk_main_in_a_child_aborts();
    printf("lifecycle: %d checks, %d failed\n", atomic_load(&checks), atomic_load(&failures));
    return failures == 0 ? 0 : 1;
}
