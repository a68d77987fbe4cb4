/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * condlock_pipeline.c — a pipeline whose stages wait for "sequence >= n", written with await.
 *
 * A reader publishes blocks in order; the lock's condition is how many are published. Each of
 * the stages (a checksum, a length count, a writer that must see the blocks in order, as
 * pigz's writer does) processes every block, waiting for the one it needs next:
 *
 *     lock; await(published >= n); ... use block n ...; unlock
 *
 * The pthread version loops around pthread_cond_wait and broadcasts on every new block, waking
 * all stages whether or not their block is there. Here each wait's test reads its own `n`
 * through the context (it changes only while the waiter holds the lock), and a release wakes
 * only a stage whose block is published (one that a running thread overtakes while it wakes
 * waits again: a futile wake-up, rare here). A bounded window keeps the
 * reader at most WINDOW blocks ahead of the slowest stage, with a second test on the same lock.
 *
 * Usage: condlock_pipeline [blocks]   (default 5000, at most 1000000)
 * Exits 0 when every stage saw every block in order and fewer wake-ups were futile than not (a
 * broadcast would make most of them futile), 1 otherwise.
 */
#include <queuekit.h>

#include <bsd/stdlib.h> /* strtonum */
#include <stdbool.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { STAGES = 3, WINDOW = 16 };

static qk_condlock_t *pipeline; /* its condition: how many blocks are published */
static long long blocks = 5000;

/* Guarded by pipeline. */
static uint64_t window[WINDOW]; /* block n lives in window[n % WINDOW] */
static long long done[STAGES];  /* how many blocks each stage has finished */
static uint64_t result[STAGES];

/* The reader's test: the slowest stage is less than WINDOW blocks behind. */
static bool room(intptr_t published, void *context) {
    (void)context;
    long long slowest = done[0];
    for (int s = 1; s < STAGES; s++)
        if (done[s] < slowest) slowest = done[s];
    return published - slowest < WINDOW;
}

/* A stage's test: block *next is published. */
static bool published_beyond(intptr_t published, void *context) {
    return published > *(const long long *)context;
}

static void check(int status, const char *what) {
    if (status != 0) {
        fprintf(stderr, "%s: %s\n", what, qk_strerror(status));
        exit(1);
    }
}

static uint64_t block_value(long long n) {
    return (uint64_t)n * 2654435761u + 1;
}

static void *reader(void *arg) {
    (void)arg;
    for (long long n = 0; n < blocks; n++) {
        check(qk_condlock_lock(pipeline), "reader lock");
        check(qk_condlock_await(pipeline, room, NULL), "reader await(room)");
        window[n % WINDOW] = block_value(n);
        check(qk_condlock_unlock_with(pipeline, n + 1), "reader unlock_with(published)");
    }
    return NULL;
}

static void *stage(void *arg) {
    int s = (int)(intptr_t)arg;
    uint64_t acc = 0;
    for (long long next = 0; next < blocks; next++) {
        check(qk_condlock_lock(pipeline), "stage lock");
        check(qk_condlock_await(pipeline, published_beyond, &next), "stage await(published > n)");
        uint64_t value = window[next % WINDOW];
        if (s == 0)
            acc += value; /* a checksum */
        else if (s == 1)
            acc ^= value * (next + 1); /* order-sensitive */
        else
            acc = acc * 31 + value; /* the writer: order-sensitive */
        done[s] = next + 1;
        /* The condition stays: the release hands the lock to a stage whose block is there, or
         * to the reader when this stage made room. */
        check(qk_condlock_unlock(pipeline), "stage unlock");
    }
    result[s] = acc;
    return NULL;
}

int main(int argc, char **argv) {
    pthread_t threads[STAGES + 1];
    qk_condlock_stats_t stats = {.size = sizeof stats};
    uint64_t expected[STAGES] = {0, 0, 0};
    int failures = 0;

    if (argc > 1) {
        const char *error = NULL;
        blocks = strtonum(argv[1], 1, 1000000, &error);
        if (error != NULL) {
            fprintf(stderr, "blocks is %s: %s\n", error, argv[1]);
            return 2;
        }
    }
    pipeline = qk_condlock_create(0);
    if (pipeline == NULL) {
        perror("qk_condlock_create");
        return 1;
    }
    qk_condlock_set_name(pipeline, "pipeline");
    for (int s = 0; s < STAGES; s++)
        if (pthread_create(&threads[s], NULL, stage, (void *)(intptr_t)s) != 0) return 1;
    if (pthread_create(&threads[STAGES], NULL, reader, NULL) != 0) return 1;
    for (int t = 0; t <= STAGES; t++) pthread_join(threads[t], NULL);

    for (long long n = 0; n < blocks; n++) {
        uint64_t value = block_value(n);
        expected[0] += value;
        expected[1] ^= value * (n + 1);
        expected[2] = expected[2] * 31 + value;
    }
    for (int s = 0; s < STAGES; s++) {
        if (result[s] != expected[s]) {
            fprintf(stderr, "stage %d saw the blocks wrong\n", s);
            failures++;
        }
    }
    check(qk_condlock_get_stats(pipeline, &stats), "get_stats");
    printf("%s: %lld blocks through %d stages, window %d\n", qk_condlock_name(pipeline), blocks,
           STAGES, WINDOW);
    printf("  acquisitions %llu, waited %llu, wake-ups %llu, futile %llu\n",
           (unsigned long long)stats.acquisitions, (unsigned long long)stats.contended,
           (unsigned long long)stats.wakeups, (unsigned long long)stats.futile_wakeups);
    if (stats.futile_wakeups * 2 >= stats.wakeups) {
        fprintf(stderr, "as many futile wake-ups as useful ones: a herd\n");
        failures++;
    }
    check(qk_condlock_destroy(pipeline), "destroy");
    if (failures != 0) {
        fprintf(stderr, "FAILED: %d invariant(s) broken\n", failures);
        return 1;
    }
    printf("every stage saw every block, in order; no herd\n");
    return 0;
}
