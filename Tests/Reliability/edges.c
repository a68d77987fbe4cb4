/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * edges.c -- patterns real C programs use at the edges of an object's life and of a fork:
 * a qk_dbqueue_write_async that is still returning while another thread flushes and destroys
 * the queue (with CPU-hog threads so that the writer is preempted inside the call), the last
 * reference released inside the queue's own barrier_sync (run it under valgrind), forks while
 * another thread holds an internal lock (each child under alarm()), a DB queue idle at a fork
 * (its worker finishing) used in the child, the stall watch in a child, a ring through a
 * concurrent target queue (refused once, not hung), labels that are not UTF-8. Each case bounds
 * its waits; a failure prints its line and the program exits 1.
 */
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define QK_EDGES_HAVE_VALGRIND 1
#endif
#endif
#include "reliability.h"

#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdatomic.h>
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

/* ---- write_async racing flush + destroy ---------------------------------------------------- */

static atomic_bool hogging;

static void *hog(void *argument) {
    (void)argument;
    volatile unsigned long spin = 0;
    while (atomic_load_explicit(&hogging, memory_order_relaxed)) spin++;
    return NULL;
}

typedef struct {
    qk_dbqueue_t *db;
    sem_t submitted;
    atomic_int ran;
} race_t;

static void count_write(void *context) {
    atomic_fetch_add_explicit(&((race_t *)context)->ran, 1, memory_order_relaxed);
}

static void *submit_one(void *argument) {
    race_t *race = argument;
    CHECK_EQ(qk_dbqueue_write_async(race->db, race, count_write), 0);
    return NULL;
}

/* Thread A calls write_async; as soon as its write is visible (it runs in B's flush), B destroys
 * the queue while A may still be inside write_async. A's call began before the destroy: the
 * destroy must not free the queue under it, and the write runs exactly once. */
static void write_async_racing_destroy(unsigned iterations) {
    enum { HOGS = 3 };
    pthread_t hogs[HOGS];
    atomic_store(&hogging, true);
    for (int i = 0; i < HOGS; i++) pthread_create(&hogs[i], NULL, hog, NULL);
    unsigned lost = 0;
    for (unsigned i = 0; i < iterations; i++) {
        race_t race = {.db = qk_dbqueue_create("race")};
        atomic_init(&race.ran, 0);
        CHECK(race.db != NULL);
        pthread_t writer;
        pthread_create(&writer, NULL, submit_one, &race);
        /* B: help until the write has run (flush runs it itself), then destroy at once. */
        int flushed = 0;
        while (atomic_load(&race.ran) == 0 && flushed == 0) flushed = qk_dbqueue_flush(race.db);
        CHECK_EQ(flushed, 0);
        CHECK_EQ(qk_dbqueue_destroy(race.db), 0);
        pthread_join(writer, NULL);
        if (atomic_load(&race.ran) != 1) lost++;
    }
    atomic_store(&hogging, false);
    for (int i = 0; i < HOGS; i++) pthread_join(hogs[i], NULL);
    CHECK_EQ(lost, 0);
}

/* ---- the last reference released inside the queue's own barrier_sync ----------------------- */

static void release_self(void *context) {
    qk_queue_release(context);
}

static void release_inside_own_sync(void) {
    for (int i = 0; i < 50; i++) {
        qk_queue_t *concurrent = qk_queue_create("released-in-barrier", QK_QUEUE_CONCURRENT);
        CHECK_EQ(qk_queue_barrier_sync(concurrent, concurrent, release_self), 0);
        qk_queue_t *serial = qk_queue_create("released-in-sync", QK_QUEUE_SERIAL);
        CHECK_EQ(qk_queue_sync(serial, serial, release_self), 0);
        qk_queue_t *performed = qk_queue_create("released-in-perform", QK_QUEUE_CONCURRENT);
        CHECK_EQ(qk_queue_perform(performed, performed, release_self), 0);
    }
}

/* ---- fork while another thread holds an internal lock --------------------------------------- */

enum { FORKS = 40, CHILD_SECONDS = 5 };

static atomic_bool racing;
static int key_a, key_b, values[2];

/* gcc's AddressSanitizer (the libasan of gcc 12) does not lock its allocator around fork(): a
 * child forked while another thread refills an allocation cache waits forever for that lock, in
 * malloc, before QueueKit does anything (seen under gdb: the child of
 * fork_while_growing_the_write_pool stuck in SizeClassAllocator64::GetFromAllocator, called from
 * qk_dbqueue_create). Under ASan the racing threads therefore make their calls inside a gate
 * that the forking thread closes around fork(), so that the fork falls between two calls; the
 * other builds of this program (ctest's, valgrind's, the TSan check's) fork in the middle of
 * calls, which is what these cases are for. */
#if defined(__SANITIZE_ADDRESS__)
#define QK_EDGES_GATE_FORKS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define QK_EDGES_GATE_FORKS 1
#endif
#endif
#ifdef QK_EDGES_GATE_FORKS
static atomic_int calls_in_flight;
static atomic_bool forking;
#endif

/* A racing thread's call begins (gate_enter) and ends (gate_leave). */
static void gate_enter(void) {
#ifdef QK_EDGES_GATE_FORKS
    for (;;) {
        atomic_fetch_add(&calls_in_flight, 1);
        if (!atomic_load(&forking)) return;
        atomic_fetch_sub(&calls_in_flight, 1);
        while (atomic_load(&forking)) sched_yield();
    }
#endif
}

static void gate_leave(void) {
#ifdef QK_EDGES_GATE_FORKS
    atomic_fetch_sub(&calls_in_flight, 1);
#endif
}

/* fork(), between two calls of the racing threads under ASan, anywhere otherwise. */
static pid_t gated_fork(void) {
#ifdef QK_EDGES_GATE_FORKS
    atomic_store(&forking, true);
    while (atomic_load(&calls_in_flight) != 0) sched_yield();
    pid_t pid = fork();
    if (pid != 0) atomic_store(&forking, false);
    return pid;
#else
    return fork();
#endif
}
static atomic_int destroyed_in_child;

static void count_destroyed(void *value) {
    (void)value;
    atomic_fetch_add(&destroyed_in_child, 1);
}

static void *set_specifics(void *argument) {
    qk_queue_t *queue = argument;
    for (unsigned i = 0; atomic_load_explicit(&racing, memory_order_relaxed); i++) {
        gate_enter();
        qk_queue_set_specific(queue, &key_a, &values[i & 1], NULL);
        gate_leave();
    }
    return NULL;
}

/* Forks FORKS times while `holder` takes the lock under test in a loop; each child runs `child`
 * under alarm() and exits with its status (a hang is SIGALRM). Returns the children that failed. */
static int fork_racing(void *(*holder)(void *), void *argument, int (*child)(void *)) {
    pthread_t thread;
    atomic_store(&racing, true);
    pthread_create(&thread, NULL, holder, argument);
    int failed = 0;
    for (int i = 0; i < FORKS; i++) {
        pid_t pid = gated_fork();
        if (pid == 0) {
            alarm(CHILD_SECONDS);
            _exit(child(argument));
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            failed++;
            if (WIFSIGNALED(status))
                fprintf(stderr, "edges: child %d ended by signal %d\n", i, WTERMSIG(status));
        }
    }
    atomic_store(&racing, false);
    pthread_join(thread, NULL);
    return failed;
}

static int child_uses_specifics(void *argument) {
    qk_queue_t *queue = argument;
    void *got = qk_queue_get_specific(queue, &key_a);
    if (got != &values[0] && got != &values[1]) return 2;
    /* A replaced value's destructor runs in the child too. */
    if (qk_queue_set_specific(queue, &key_b, &values[0], count_destroyed) != 0) return 3;
    if (qk_queue_set_specific(queue, &key_b, &values[1], count_destroyed) != 0) return 4;
    if (atomic_load(&destroyed_in_child) != 1) return 5;
    return 0;
}

static void fork_while_setting_specifics(void) {
    qk_queue_t *queue = qk_queue_create("specifics-at-fork", QK_QUEUE_SERIAL);
    CHECK_EQ(qk_queue_set_specific(queue, &key_a, &values[0], NULL), 0);
    CHECK_EQ(fork_racing(set_specifics, queue, child_uses_specifics), 0);
    qk_queue_release(queue);
}

/* The lock-order witness's mode changes under a lock of its own: a child forked while another
 * thread changes the mode changes it too. */
static void *toggle_lock_order(void *argument) {
    (void)argument;
    while (atomic_load(&racing)) {
        gate_enter();
        qk_set_lock_order_mode(QK_LOCK_ORDER_REPORT);
        gate_leave();
        gate_enter();
        qk_set_lock_order_mode(QK_LOCK_ORDER_OFF);
        gate_leave();
    }
    return NULL;
}

static int child_sets_lock_order(void *argument) {
    (void)argument;
    if (qk_set_lock_order_mode(QK_LOCK_ORDER_REPORT) != 0) return 2;
    if (qk_set_lock_order_mode(QK_LOCK_ORDER_OFF) != 0) return 3;
    return qk_lock_order_mode() == QK_LOCK_ORDER_OFF ? 0 : 4;
}

static void fork_while_changing_lock_order(void) {
    CHECK_EQ(fork_racing(toggle_lock_order, NULL, child_sets_lock_order), 0);
    qk_set_lock_order_mode(QK_LOCK_ORDER_OFF);
}

/* The write-node pool grows (under its lock) when every node is in use: a write that blocks the
 * worker keeps the writes behind it pending, so each burst of submissions grows the pool. */
static sem_t gate, gate_entered;

static void blocked_write(void *context) {
    (void)context;
    sem_post(&gate_entered);
    sem_wait(&gate);
}

static void nothing(void *context) {
    (void)context;
}

static void *grow_pool(void *argument) {
    qk_dbqueue_t *db = argument;
    CHECK_EQ(qk_dbqueue_write_async(db, NULL, blocked_write), 0);
    sem_wait(&gate_entered);
    int failed = 0;
    for (long i = 0; i < (1l << 21) && atomic_load_explicit(&racing, memory_order_relaxed); i++) {
        gate_enter();
        failed += qk_dbqueue_write_async(db, NULL, nothing) != 0;
        gate_leave();
    }
    CHECK_EQ(failed, 0);
    sem_post(&gate);
    return NULL;
}

static int child_creates_db_queue(void *argument) {
    (void)argument;
    qk_dbqueue_t *db = qk_dbqueue_create("created-in-child");
    if (db == NULL) return 2;
    if (qk_dbqueue_write(db, NULL, nothing) != 0) return 3;
    return qk_dbqueue_destroy(db) == 0 ? 0 : 4;
}

static void fork_while_growing_the_write_pool(void) {
    sem_init(&gate, 0, 0);
    sem_init(&gate_entered, 0, 0);
    qk_dbqueue_t *db = qk_dbqueue_create("grows-the-pool");
    CHECK_EQ(fork_racing(grow_pool, db, child_creates_db_queue), 0);
    CHECK_EQ(qk_dbqueue_destroy(db), 0);
}

/* A DB queue whose writes have all run (flush returned) is idle at the fork, even while its
 * worker lingers: the child reads, writes and flushes it. */
static void fork_after_flush(void) {
    int failed = 0;
    for (int i = 0; i < 200; i++) {
        qk_dbqueue_t *db = qk_dbqueue_create("idle-at-fork");
        for (int w = 0; w < 100; w++) CHECK_EQ(qk_dbqueue_write_async(db, NULL, nothing), 0);
        CHECK_EQ(qk_dbqueue_flush(db), 0);
        pid_t pid = fork();
        if (pid == 0) {
            alarm(CHILD_SECONDS);
            int status = qk_dbqueue_read(db, NULL, nothing) != 0    ? 2
                         : qk_dbqueue_write(db, NULL, nothing) != 0 ? 3
                         : qk_dbqueue_flush(db) != 0                ? 4
                         : qk_dbqueue_destroy(db) != 0              ? 5
                                                                    : 0;
            _exit(status);
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            failed++;
            fprintf(stderr, "edges: idle DB queue in child %d: status %#x\n", i, status);
        }
        CHECK_EQ(qk_dbqueue_destroy(db), 0);
    }
    CHECK_EQ(failed, 0);
}

/* ---- labels are bytes ------------------------------------------------------------------------ */

/* ---- a ring through a concurrent target queue ----------------------------------------------- */

/* T1 holds lock L and syncs onto serial queue X, which targets concurrent queue C; T2 runs a
 * barrier of C and locks L. X's block would run on C behind the barrier, which waits for L:
 * exactly one of the two calls is refused (EDEADLK), the other runs, nothing hangs. */
static qk_queue_t *ring_concurrent, *ring_serial;
static qk_condlock_t *ring_lock;
static pthread_barrier_t ring_meet;
static atomic_int ring_refused, ring_ran;

static void ignore_report(void *context, const char *report) {
    (void)context;
    (void)report;
}

static void ring_count(int status) {
    if (status == EDEADLK) atomic_fetch_add(&ring_refused, 1);
}

static void ring_ran_once(void *context) {
    (void)context;
    atomic_fetch_add(&ring_ran, 1);
}

static void ring_barrier_body(void *context) {
    (void)context;
    pthread_barrier_wait(&ring_meet);
    int status = qk_condlock_lock(ring_lock);
    ring_count(status);
    if (status == 0) {
        ring_ran_once(NULL);
        qk_condlock_unlock(ring_lock);
    }
}

static void *ring_barrier(void *argument) {
    (void)argument;
    ring_count(qk_queue_barrier_sync(ring_concurrent, NULL, ring_barrier_body));
    return NULL;
}

static void *ring_syncer(void *argument) {
    (void)argument;
    qk_condlock_lock(ring_lock);
    pthread_barrier_wait(&ring_meet);
    ring_count(qk_queue_sync(ring_serial, NULL, ring_ran_once));
    qk_condlock_unlock(ring_lock);
    return NULL;
}

static void ring_through_concurrent_target(int rounds) {
    ring_concurrent = qk_queue_create("ring.concurrent", QK_QUEUE_CONCURRENT);
    ring_serial = qk_queue_create_with_target("ring.serial", QK_QUEUE_SERIAL, ring_concurrent);
    ring_lock = qk_condlock_create(0);
    qk_condlock_set_name(ring_lock, "ring.lock");
    qk_set_deadlock_handler(ignore_report, NULL);
    alarm(60); /* a hang fails the program instead of the CI run */
    for (int round = 0; round < rounds; round++) {
        atomic_store(&ring_refused, 0);
        atomic_store(&ring_ran, 0);
        pthread_barrier_init(&ring_meet, NULL, 2);
        pthread_t barrier, syncer;
        pthread_create(&barrier, NULL, ring_barrier, NULL);
        pthread_create(&syncer, NULL, ring_syncer, NULL);
        pthread_join(barrier, NULL);
        pthread_join(syncer, NULL);
        pthread_barrier_destroy(&ring_meet);
        CHECK_EQ(atomic_load(&ring_refused), 1);
        CHECK_EQ(atomic_load(&ring_ran), 1);
    }
    alarm(0);
    qk_set_deadlock_handler(NULL, NULL);
    CHECK_EQ(qk_condlock_destroy(ring_lock), 0);
    qk_queue_release(ring_serial);
    qk_queue_release(ring_concurrent);
}

/* ---- the stall watch in a forked child --------------------------------------------------- */

/* The parent turns the watch on and sees it report; in the child (whose watcher thread did not
 * survive the fork) a wait that outlasts the threshold still reaches the handler. */
static sem_t stall_reported;
static const char *_Atomic stall_marker;

static void note_stall(void *context, const char *report) {
    (void)context;
    if (strstr(report, atomic_load(&stall_marker)) != NULL) sem_post(&stall_reported);
}

static void *wait_for_lock(void *argument) {
    int status = qk_condlock_lock_until(argument, qk_now_ns() + 3000000000ull);
    if (status == 0) qk_condlock_unlock(argument);
    return NULL;
}

/* A wait of another thread on a lock named `name`, held here until the stall handler reported
 * it (3 s at most): 0 when it did; otherwise the step that failed. */
static int stall_reported_for(const char *name) {
    atomic_store(&stall_marker, name);
    qk_condlock_t *lock = qk_condlock_create(0);
    qk_condlock_set_name(lock, name);
    if (qk_condlock_lock(lock) != 0) return 2;
    pthread_t waiter;
    if (pthread_create(&waiter, NULL, wait_for_lock, lock) != 0) return 3;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 3;
    int reported = sem_timedwait(&stall_reported, &deadline) == 0;
    qk_condlock_unlock(lock);
    pthread_join(waiter, NULL);
    qk_condlock_destroy(lock);
    return reported ? 0 : 4;
}

static void stall_watch_in_child(void) {
    CHECK_EQ(sem_init(&stall_reported, 0, 0), 0);
    CHECK_EQ(qk_set_stall_handler(20000000ull, note_stall, NULL), 0); /* 20 ms */
    /* The watcher runs (and has reported once) before the fork: the fork does not catch the
     * thread in the middle of starting. */
    CHECK_EQ(stall_reported_for("stall-in-parent"), 0);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(2 * CHILD_SECONDS);
        _exit(stall_reported_for("stall-in-child"));
    }
    int status = 0;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fprintf(stderr, "edges: stall watch in the child: status %#x\n", status);
    CHECK_EQ(qk_set_stall_handler(0, NULL, NULL), 0);
}

static void labels_keep_their_bytes(void) {
    static const char bytes[] = "caf\xe9-\xff\xfe";
    qk_queue_t *queue = qk_queue_create(bytes, QK_QUEUE_SERIAL);
    CHECK_EQ(strcmp(qk_queue_label(queue), bytes), 0);
    qk_queue_release(queue);
    qk_dbqueue_t *db = qk_dbqueue_create(bytes);
    CHECK_EQ(strcmp(qk_queue_label(qk_dbqueue_queue(db)), bytes), 0);
    CHECK_EQ(qk_dbqueue_destroy(db), 0);
}

int main(int argc, char **argv) {
    unsigned iterations = 2000;
    if (argc == 3 && strcmp(argv[1], "--iterations") == 0) iterations = (unsigned)atoi(argv[2]);
    bool under_valgrind = false;
#if QK_EDGES_HAVE_VALGRIND
    /* Under valgrind (ctest -T memcheck) the loops are about a hundred times slower and threads
     * run one at a time: a few iterations still check every access the race makes, and the fork
     * races (which need threads running during the fork, and children within their alarm) run in
     * the plain ctest run only. */
    under_valgrind = RUNNING_ON_VALGRIND;
    if (under_valgrind && iterations > 20) iterations = 20;
#endif
    write_async_racing_destroy(iterations);
    release_inside_own_sync();
    ring_through_concurrent_target(under_valgrind ? 5 : 50);
    if (!under_valgrind) {
        fork_while_setting_specifics();
        fork_while_growing_the_write_pool();
        fork_while_changing_lock_order();
        fork_after_flush();
        stall_watch_in_child();
    }
    labels_keep_their_bytes();
    printf("edges: %d checks, %d failures\n", atomic_load(&checks), atomic_load(&failures));
    return atomic_load(&failures) == 0 ? 0 : 1;
}
