/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * queue_precondition.c — stating which queue code must run on, and catching the caller that
 * breaks the rule.
 *
 * Swift has dispatchPrecondition(condition: .onQueue(q) / .onQueueAsBarrier(q) / .notOnQueue(q));
 * C has dispatch_assert_queue(). QueueKit offers both flavours, with the same view of the thread
 * as dispatch_assert_queue — a queue held further out, by a block waiting in a sync on another
 * queue, still counts as "on the queue":
 *
 *   qk_queue_check(q, predicate)         returns 0 or EPERM: for code that can recover;
 *   qk_queue_precondition(q, predicate)  aborts with one line naming the expected and the
 *                                        current queue: for bugs that must not go unnoticed.
 *
 * The predicates:
 *   QK_ON_QUEUE             the thread runs a block of q (here, or further out);
 *   QK_ON_QUEUE_AS_BARRIER  ... and runs q alone (a serial queue, or a barrier block);
 *   QK_NOT_ON_QUEUE         the thread runs no block of q at all (e.g. before a blocking wait).
 *
 * Usage: queue_precondition [--fail]
 *   Without arguments every precondition holds and the program exits 0 (1 if an expectation
 *   fails). With --fail it then breaks one on purpose: a reader of a concurrent queue claims to
 *   run it as a barrier, and the process aborts after printing
 *     QueueKit precondition failed: expected to be on queue as barrier 'example.cache', but the
 *     current queue is 'example.cache' (the thread runs 'example.cache' shared, not as a barrier)
 *   so the exit status is non-zero (SIGABRT).
 */
#include <queuekit.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;

static void expect(int condition, const char *what) {
    printf("%s %s\n", condition ? "ok  " : "FAIL", what);
    if (!condition) failures++;
}

struct queues {
    qk_queue_t *state; /* serial: owns some mutable state */
    qk_queue_t *cache; /* concurrent: readers share it, writers use barriers */
    int fail;          /* --fail given */
};

/* Code that mutates the cache: it must run as a barrier of the cache queue. */
static void write_cache(void *context) {
    struct queues *q = context;
    qk_queue_precondition(q->cache, QK_ON_QUEUE_AS_BARRIER);
    printf("      write_cache: running as a barrier, as required\n");
}

/* Code that reads the cache: any block of the cache queue will do. */
static void read_cache(void *context) {
    struct queues *q = context;
    qk_queue_precondition(q->cache, QK_ON_QUEUE);
    expect(qk_queue_check(q->cache, QK_ON_QUEUE_AS_BARRIER) == EPERM,
           "reader: qk_queue_check(cache, AS_BARRIER) is EPERM, a reader shares the queue");
    if (q->fail) {
        /* The bug: a reader calls code that requires exclusive access. */
        printf("      --fail: calling write_cache from a reader; this aborts\n");
        fflush(stdout);
        write_cache(q);
        printf("FAIL qk_queue_precondition returned although its predicate failed\n");
    }
}

/* State updates that also consult the cache: sync from the state queue to the cache queue. */
static void update_state(void *context) {
    struct queues *q = context;
    qk_queue_precondition(q->state, QK_ON_QUEUE_AS_BARRIER); /* a serial queue: always exclusive */
    qk_queue_precondition(q->cache, QK_NOT_ON_QUEUE);
    qk_queue_sync(q->cache, q, read_cache);
}

/* Runs inside the cache queue, called synchronously from the state queue: the state queue is held
 * further out, which dispatch_assert_queue (and qk_queue_precondition) count as "on it". */
static void check_through_hop(void *context) {
    struct queues *q = context;
    qk_queue_precondition(q->state, QK_ON_QUEUE);
    expect(!qk_queue_is_current(q->state),
           "hop: the state queue is not *current* (only held further out)");
    expect(qk_queue_check(q->state, QK_ON_QUEUE) == 0,
           "hop: but qk_queue_check(state, ON_QUEUE) holds");
}

static void hop_into_cache(void *context) {
    struct queues *q = context;
    qk_queue_sync(q->cache, q, check_through_hop);
}

int main(int argc, char **argv) {
    struct queues q;
    memset(&q, 0, sizeof q);
    if (argc == 2 && strcmp(argv[1], "--fail") == 0) {
        q.fail = 1;
    } else if (argc != 1) {
        fprintf(stderr, "usage: %s [--fail]\n", argv[0]);
        return 2;
    }
    q.state = qk_queue_create("example.state", QK_QUEUE_SERIAL);
    q.cache = qk_queue_create("example.cache", QK_QUEUE_CONCURRENT);
    if (q.state == NULL || q.cache == NULL) return 1;

    /* On the main thread outside any block, the main queue is current. */
    qk_queue_precondition(qk_queue_main(), QK_ON_QUEUE);
    qk_queue_precondition(q.state, QK_NOT_ON_QUEUE);
    expect(qk_queue_check(q.state, QK_ON_QUEUE) == EPERM,
           "main thread: qk_queue_check(state, ON_QUEUE) is EPERM");

    /* Misuse is an error code for check (precondition would abort on it). */
    expect(qk_queue_check(NULL, QK_ON_QUEUE) == EINVAL, "qk_queue_check(NULL) is EINVAL");
    expect(qk_queue_check(q.state, (qk_predicate_t)42) == EINVAL,
           "qk_queue_check(bad predicate) is EINVAL");

    qk_queue_barrier_sync(q.cache, &q, write_cache);
    qk_queue_sync(q.state, &q, hop_into_cache);
    qk_queue_sync(q.state, &q, update_state); /* with --fail, the process ends in here */

    qk_queue_release(q.cache);
    qk_queue_release(q.state);
    printf("%s\n", failures == 0 ? "all expectations held" : "SOME EXPECTATIONS FAILED");
    return failures == 0 ? 0 : 1;
}
