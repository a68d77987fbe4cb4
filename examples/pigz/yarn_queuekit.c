/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/* The interface of pigz's yarn.h (locks with a value, threads) over QueueKit's condition lock.
 *
 * A yarn lock is a qk_condlock_t whose condition is the lock's value:
 *   possess / release          qk_condlock_lock / qk_condlock_unlock
 *   twist(TO | BY, v)          qk_condlock_unlock_with (the new value, and the release, in one step)
 *   wait_for(op, v)            qk_condlock_await with a test per op (==, !=, >, <)
 *   peek_lock                  qk_condlock_condition
 *   new_lock / free_lock       qk_condlock_create / qk_condlock_destroy
 * A twist does not wake every waiter to re-check its predicate: the release wakes the first
 * waiter whose test the new value passes, that one alone. No call here loops around a wait,
 * sleeps or polls; a wait returns holding the lock with its test true.
 *
 * Threads are pthreads; the list of launched threads and the count of those that have finished
 * are guarded by one more condition lock (join_all waits for the count to be nonzero).
 *
 * With YARN_QUEUEKIT_STATS set in the environment, the process prints one line at exit: the
 * locks, the waits, the polls (waits that returned with their test false: there must be none),
 * and the futile wake-ups (a waiter woken to take its lock that a running thread overtook, which
 * then waited again at its place in line: the price of eventual fairness, a few per thousand
 * waits). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <queuekit.h>

#include "yarn.h"

char *yarn_prefix = "yarn";
void (*yarn_abort)(int) = NULL;

static void *(*lease)(size_t) = malloc;
static void (*vacate)(void *) = free;

void yarn_mem(void *(*better_malloc)(size_t), void (*better_free)(void *)) {
    lease = better_malloc;
    vacate = better_free;
}

/* A call that cannot fail did: say where, then abort as yarn's contract asks. */
static void fail(int err, char const *file, long line, char const *what) {
    fprintf(stderr, "%s: %s: %s (%s:%ld)\n", yarn_prefix, what, qk_strerror(err), file, line);
    if (yarn_abort != NULL) yarn_abort(err);
    exit(err);
}

static void *allocate(size_t size, char const *file, long line) {
    void *block = lease(size);
    if (block == NULL) fail(ENOMEM, file, line, "malloc");
    return block;
}

/* ---- Counters (YARN_QUEUEKIT_STATS) --------------------------------------------------------- */

static atomic_ulong locks_made, waits, polls, futile;

static void add_lock_stats(qk_condlock_t *lock) {
    qk_condlock_stats_t stats = {.size = sizeof stats};
    if (qk_condlock_get_stats(lock, &stats) == 0) atomic_fetch_add(&futile, stats.futile_wakeups);
}

/* ---- Locks ---------------------------------------------------------------------------------- */

struct lock_s {
    qk_condlock_t *cl;
};

lock *new_lock_(long initial, char const *file, long line) {
    lock *bolt = allocate(sizeof *bolt, file, line);
    bolt->cl = qk_condlock_create((intptr_t)initial);
    if (bolt->cl == NULL) fail(errno, file, line, "qk_condlock_create");
    atomic_fetch_add_explicit(&locks_made, 1, memory_order_relaxed);
    return bolt;
}

void possess_(lock *bolt, char const *file, long line) {
    int status = qk_condlock_lock(bolt->cl);
    if (status != 0) fail(status, file, line, "qk_condlock_lock");
}

void release_(lock *bolt, char const *file, long line) {
    int status = qk_condlock_unlock(bolt->cl);
    if (status != 0) fail(status, file, line, "qk_condlock_unlock");
}

void twist_(lock *bolt, enum twist_op op, long val, char const *file, long line) {
    long value = op == TO ? val : (long)qk_condlock_condition(bolt->cl) + val;
    int status = qk_condlock_unlock_with(bolt->cl, (intptr_t)value);
    if (status != 0) fail(status, file, line, "qk_condlock_unlock_with");
}

/* The tests of wait_for: `context` is the waiter's operand, which lives on its stack while it
 * waits. Called by whichever thread releases the lock; they read nothing else. */
static bool to_be(intptr_t condition, void *context) {
    return (long)condition == *(const long *)context;
}
static bool not_to_be(intptr_t condition, void *context) {
    return (long)condition != *(const long *)context;
}
static bool to_be_more_than(intptr_t condition, void *context) {
    return (long)condition > *(const long *)context;
}
static bool to_be_less_than(intptr_t condition, void *context) {
    return (long)condition < *(const long *)context;
}

void wait_for_(lock *bolt, enum wait_op op, long val, char const *file, long line) {
    qk_condition_test_t test = op == TO_BE             ? to_be
                               : op == NOT_TO_BE       ? not_to_be
                               : op == TO_BE_MORE_THAN ? to_be_more_than
                                                       : to_be_less_than;
    atomic_fetch_add_explicit(&waits, 1, memory_order_relaxed);
    int status = qk_condlock_await(bolt->cl, test, &val);
    if (status != 0) fail(status, file, line, "qk_condlock_await");
    /* The await returns holding the lock with the test true; a false one would be a poll. */
    if (!test(qk_condlock_condition(bolt->cl), &val)) {
        atomic_fetch_add_explicit(&polls, 1, memory_order_relaxed);
        fail(EINVAL, file, line, "qk_condlock_await returned with its test false");
    }
}

long peek_lock(lock *bolt) {
    return (long)qk_condlock_condition(bolt->cl);
}

void free_lock_(lock *bolt, char const *file, long line) {
    if (bolt == NULL) return;
    add_lock_stats(bolt->cl);
    int status = qk_condlock_destroy(bolt->cl);
    if (status != 0) fail(status, file, line, "qk_condlock_destroy");
    vacate(bolt);
}

/* ---- Threads -------------------------------------------------------------------------------- */

struct thread_s {
    pthread_t id;
    int done; /* the probe has returned; guarded by `threads_lock` */
    thread *next;
};

/* The launched threads not yet joined, and (the lock's value) how many of them are done. */
static lock threads_lock;
static thread *threads;
static pthread_once_t threads_once = PTHREAD_ONCE_INIT;

static void report(void) {
    add_lock_stats(threads_lock.cl);
    fprintf(stderr, "yarn-queuekit: %lu locks, %lu waits, %lu polls, %lu futile wake-ups\n",
            (unsigned long)atomic_load(&locks_made), (unsigned long)atomic_load(&waits),
            (unsigned long)atomic_load(&polls), (unsigned long)atomic_load(&futile));
}

static void make_threads_lock(void) {
    threads_lock.cl = qk_condlock_create(0);
    if (threads_lock.cl == NULL) fail(errno, __FILE__, __LINE__, "qk_condlock_create");
    qk_condlock_set_name(threads_lock.cl, "yarn threads");
    if (getenv("YARN_QUEUEKIT_STATS") != NULL) atexit(report);
}

static lock *threads_guard(void) {
    pthread_once(&threads_once, make_threads_lock);
    return &threads_lock;
}

struct start {
    void (*probe)(void *);
    void *payload;
    char const *file;
    long line;
};

/* Unlinks `match` (found through `prior`) and frees it: the caller possesses `threads_lock`. */
static void forget(thread **prior, thread *match) {
    *prior = match->next;
    vacate(match);
}

static void *run(void *arg) {
    struct start start = *(struct start *)arg;
    vacate(arg);
    start.probe(start.payload);

    /* Done: mark this thread in the list and count it for join_all. */
    possess_(threads_guard(), start.file, start.line);
    pthread_t me = pthread_self();
    thread *match = threads;
    while (match != NULL && !pthread_equal(match->id, me)) match = match->next;
    if (match == NULL) fail(ESRCH, start.file, start.line, "a finished thread is not listed");
    match->done = 1;
    twist_(&threads_lock, BY, +1, start.file, start.line);
    return NULL;
}

thread *launch_(void (*probe)(void *), void *payload, char const *file, long line) {
    struct start *start = allocate(sizeof *start, file, line);
    *start = (struct start){probe, payload, file, line};
    thread *th = allocate(sizeof *th, file, line);

    /* Listed before the thread can look for itself. */
    possess_(threads_guard(), file, line);
    int status = pthread_create(&th->id, NULL, run, start);
    if (status != 0) fail(status, file, line, "pthread_create");
    th->done = 0;
    th->next = threads;
    threads = th;
    release_(&threads_lock, file, line);
    return th;
}

void join_(thread *ally, char const *file, long line) {
    int status = pthread_join(ally->id, NULL);
    if (status != 0) fail(status, file, line, "pthread_join");
    possess_(threads_guard(), file, line);
    thread **prior = &threads;
    while (*prior != NULL && *prior != ally) prior = &(*prior)->next;
    if (*prior == NULL) fail(ESRCH, file, line, "joined thread is not listed");
    long done = ally->done;
    forget(prior, ally);
    /* One finished thread fewer to count (it had counted itself before exiting). */
    twist_(&threads_lock, BY, -done, file, line);
}

int join_all_(char const *file, long line) {
    int joined = 0;
    possess_(threads_guard(), file, line);
    while (threads != NULL) {
        wait_for_(&threads_lock, NOT_TO_BE, 0, file, line);
        thread **prior = &threads;
        while (*prior != NULL && !(*prior)->done) prior = &(*prior)->next;
        if (*prior == NULL) fail(ESRCH, file, line, "no finished thread is listed");
        int status = pthread_join((*prior)->id, NULL);
        if (status != 0) fail(status, file, line, "pthread_join");
        forget(prior, *prior);
        /* Still holding the lock: the count drops as the list does. */
        twist_(&threads_lock, BY, -1, file, line);
        possess_(&threads_lock, file, line);
        joined++;
    }
    release_(&threads_lock, file, line);
    return joined;
}
