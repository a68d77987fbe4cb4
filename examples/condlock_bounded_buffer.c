/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * condlock_bounded_buffer.c — the classic bounded buffer of N items, written with await.
 *
 * The pthread version needs a mutex, two condition variables and a loop around every wait:
 *
 *     pthread_mutex_lock(&m);
 *     while (count == CAPACITY) pthread_cond_wait(&not_full, &m);
 *     ... put ...
 *     pthread_cond_signal(&not_empty);
 *     pthread_mutex_unlock(&m);
 *
 * Here the condition of one QueueKit condition lock is the fill level, and a wait names the test
 * it needs ("count < CAPACITY", "count > 0"). qk_condlock_await releases the lock, waits until a
 * release leaves a fill level its test accepts, and returns holding the lock: no loop, no second
 * variable to signal, and a release wakes only a thread that can go on. (A running thread may
 * still take the lock first while that thread wakes, which then waits again: a futile wake-up,
 * a few in a hundred here, where a broadcast would wake every waiter for each item.)
 * unlock_with(count +/- 1) publishes the new level and releases in one step.
 *
 * Usage: condlock_bounded_buffer [items-per-producer]   (default 5000, at most 100000)
 * Exits 0 when every item was consumed exactly once and fewer wake-ups were futile than not (a
 * herd would make most of them futile), 1 otherwise.
 */
#include <queuekit.h>

#include <bsd/stdlib.h> /* strtonum */
#include <stdbool.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

enum { CAPACITY = 8, PRODUCERS = 3, CONSUMERS = 3, MAX_ITEMS = 100000 };

static qk_condlock_t *buffer_lock; /* its condition: how many items the buffer holds */
static long long items_per_producer = 5000;

/* Guarded by buffer_lock. */
static long long ring[CAPACITY];
static int head; /* the next item to take; the count is the lock's condition */
static unsigned char *times_consumed;

static bool not_full(intptr_t count, void *context) {
    (void)context;
    return count < CAPACITY;
}

static bool not_empty(intptr_t count, void *context) {
    (void)context;
    return count > 0;
}

static void check(int status, const char *what) {
    if (status != 0) {
        fprintf(stderr, "%s: %s\n", what, qk_strerror(status));
        exit(1);
    }
}

static void *producer(void *arg) {
    long long first = (long long)(intptr_t)arg * items_per_producer;
    for (long long i = 0; i < items_per_producer; i++) {
        check(qk_condlock_lock(buffer_lock), "producer lock");
        check(qk_condlock_await(buffer_lock, not_full, NULL), "producer await(not full)");
        intptr_t count = qk_condlock_condition(buffer_lock);
        ring[(head + count) % CAPACITY] = first + i;
        check(qk_condlock_unlock_with(buffer_lock, count + 1), "producer unlock_with(count + 1)");
    }
    return NULL;
}

static void *consumer(void *arg) {
    long long share = (long long)(intptr_t)arg;
    for (long long i = 0; i < share; i++) {
        check(qk_condlock_lock(buffer_lock), "consumer lock");
        check(qk_condlock_await(buffer_lock, not_empty, NULL), "consumer await(not empty)");
        intptr_t count = qk_condlock_condition(buffer_lock);
        times_consumed[ring[head]]++;
        head = (head + 1) % CAPACITY;
        check(qk_condlock_unlock_with(buffer_lock, count - 1), "consumer unlock_with(count - 1)");
    }
    return NULL;
}

int main(int argc, char **argv) {
    pthread_t threads[PRODUCERS + CONSUMERS];
    qk_condlock_stats_t stats = {.size = sizeof stats};
    int failures = 0;

    if (argc > 1) {
        const char *error = NULL;
        items_per_producer = strtonum(argv[1], 1, MAX_ITEMS, &error);
        if (error != NULL) {
            fprintf(stderr, "items-per-producer is %s: %s\n", error, argv[1]);
            return 2;
        }
    }
    long long total = items_per_producer * PRODUCERS;
    times_consumed = calloc((size_t)total, 1);
    buffer_lock = qk_condlock_create(0);
    if (times_consumed == NULL || buffer_lock == NULL) {
        perror("setup");
        return 1;
    }
    qk_condlock_set_name(buffer_lock, "bounded buffer");

    for (int c = 0; c < CONSUMERS; c++) {
        long long share = total / CONSUMERS + (c < total % CONSUMERS ? 1 : 0);
        if (pthread_create(&threads[PRODUCERS + c], NULL, consumer, (void *)(intptr_t)share) != 0)
            return 1;
    }
    for (int p = 0; p < PRODUCERS; p++)
        if (pthread_create(&threads[p], NULL, producer, (void *)(intptr_t)p) != 0) return 1;
    for (int t = 0; t < PRODUCERS + CONSUMERS; t++) pthread_join(threads[t], NULL);

    for (long long i = 0; i < total; i++) {
        if (times_consumed[i] != 1) {
            fprintf(stderr, "item %lld consumed %d times\n", i, times_consumed[i]);
            failures++;
        }
    }
    if (qk_condlock_condition(buffer_lock) != 0) failures++;
    check(qk_condlock_get_stats(buffer_lock, &stats), "get_stats");
    printf("%s (%d slots): %lld items through %d producers and %d consumers\n",
           qk_condlock_name(buffer_lock), CAPACITY, total, PRODUCERS, CONSUMERS);
    printf("  acquisitions %llu, waited %llu, wake-ups %llu, futile %llu\n",
           (unsigned long long)stats.acquisitions, (unsigned long long)stats.contended,
           (unsigned long long)stats.wakeups, (unsigned long long)stats.futile_wakeups);
    if (stats.futile_wakeups * 2 >= stats.wakeups) {
        fprintf(stderr, "as many futile wake-ups as useful ones: a herd\n");
        failures++;
    }
    check(qk_condlock_destroy(buffer_lock), "destroy");
    free(times_consumed);
    if (failures != 0) {
        fprintf(stderr, "FAILED: %d invariant(s) broken\n", failures);
        return 1;
    }
    printf("every item consumed exactly once, no herd\n");
    return 0;
}
