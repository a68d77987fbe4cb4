/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * condlock_producer_consumer.c — a bounded producer/consumer on a QueueKit condition lock.
 *
 * The original pattern's model: the condition is the state of a one-slot mailbox, EMPTY or FULL. Producers
 * wait for EMPTY, fill the slot and release with FULL; consumers wait for FULL, empty the slot
 * and release with EMPTY. Because a condition lock compares for equality, each state must be a
 * value you can name, which is why the classic form has a single slot (a buffer of N items would
 * need a value per fill level, and "not full" is not one value).
 *
 * What QueueKit adds over NSConditionLock: unlock_with(FULL) wakes exactly one consumer (the one
 * that has waited longest), never the producers waiting for EMPTY, so there is no thundering herd
 * (the stats show it: a wake-up is futile only when a running consumer took the slot first).
 *
 * Usage: condlock_producer_consumer [items-per-producer]   (default 2000, at most 100000)
 * Exits 0 when every item was consumed exactly once, 1 otherwise.
 */
#include <queuekit.h>

#include <bsd/stdlib.h> /* strtonum, arc4random_uniform */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAILBOX_EMPTY = 0, MAILBOX_FULL = 1 };
enum { PRODUCERS = 4, CONSUMERS = 4, MAX_ITEMS = 100000 };

static qk_condlock_t *mailbox_lock;
static long long items_per_producer = 2000;

/* Guarded by mailbox_lock. */
static long long slot;                /* the item in the mailbox */
static unsigned char *times_consumed; /* per item id */
static unsigned long long produced_sum, consumed_sum;

/* Stops the program on an unexpected status: every call below is expected to succeed. */
static void check(int status, const char *what) {
    if (status != 0) {
        fprintf(stderr, "%s: %s\n", what, qk_strerror(status));
        exit(1);
    }
}

static void *producer(void *arg) {
    long long first = (long long)(intptr_t)arg * items_per_producer;
    long long i;
    for (i = 0; i < items_per_producer; i++) {
        check(qk_condlock_lock_when(mailbox_lock, MAILBOX_EMPTY), "producer lock_when(EMPTY)");
        slot = first + i;
        produced_sum += (unsigned long long)slot;
        /* Set FULL and release in one step: no consumer can see the lock free and still EMPTY. */
        check(qk_condlock_unlock_with(mailbox_lock, MAILBOX_FULL), "producer unlock_with(FULL)");
    }
    return NULL;
}

static void *consumer(void *arg) {
    long long share = (long long)(intptr_t)arg;
    long long i;
    for (i = 0; i < share; i++) {
        long long item;
        check(qk_condlock_lock_when(mailbox_lock, MAILBOX_FULL), "consumer lock_when(FULL)");
        item = slot;
        slot = -1;
        times_consumed[item]++;
        consumed_sum += (unsigned long long)item;
        check(qk_condlock_unlock_with(mailbox_lock, MAILBOX_EMPTY), "consumer unlock_with(EMPTY)");
    }
    return NULL;
}

int main(int argc, char **argv) {
    pthread_t threads[PRODUCERS + CONSUMERS];
    long long shares[CONSUMERS], total, left, i;
    qk_condlock_stats_t stats;
    int c, failures = 0;

    if (argc > 1) {
        const char *error = NULL;
        items_per_producer = strtonum(argv[1], 1, MAX_ITEMS, &error);
        if (error != NULL) {
            fprintf(stderr, "items-per-producer is %s: %s\n", error, argv[1]);
            return 2;
        }
    }
    total = items_per_producer * PRODUCERS;
    times_consumed = calloc((size_t)total, 1);
    mailbox_lock = qk_condlock_create(MAILBOX_EMPTY);
    if (times_consumed == NULL || mailbox_lock == NULL) {
        perror("setup");
        return 1;
    }
    qk_condlock_set_name(mailbox_lock, "mailbox");

    /* Consumers take uneven, random shares of the items, so they finish at different times. */
    left = total;
    for (c = 0; c < CONSUMERS - 1; c++) {
        shares[c] =
            left / (CONSUMERS - c) / 2 + arc4random_uniform((uint32_t)(left / (CONSUMERS - c)) + 1);
        if (shares[c] > left) shares[c] = left;
        left -= shares[c];
    }
    shares[CONSUMERS - 1] = left;

    for (c = 0; c < CONSUMERS; c++)
        if (pthread_create(&threads[PRODUCERS + c], NULL, consumer, (void *)(intptr_t)shares[c]) !=
            0)
            return 1;
    for (c = 0; c < PRODUCERS; c++)
        if (pthread_create(&threads[c], NULL, producer, (void *)(intptr_t)c) != 0) return 1;
    for (c = 0; c < PRODUCERS + CONSUMERS; c++) pthread_join(threads[c], NULL);

    for (i = 0; i < total; i++) {
        if (times_consumed[i] != 1) {
            fprintf(stderr, "item %lld consumed %d times\n", i, times_consumed[i]);
            failures++;
        }
    }
    if (produced_sum != consumed_sum) failures++;
    if (qk_condlock_condition(mailbox_lock) != MAILBOX_EMPTY) failures++;

    stats.size = sizeof stats;
    check(qk_condlock_get_stats(mailbox_lock, &stats), "get_stats");
    printf("%s: %lld items through %d producers and %d consumers\n", qk_condlock_name(mailbox_lock),
           total, PRODUCERS, CONSUMERS);
    printf("  acquisitions %llu, waited %llu, wake-ups %llu, futile %llu\n",
           (unsigned long long)stats.acquisitions, (unsigned long long)stats.contended,
           (unsigned long long)stats.wakeups, (unsigned long long)stats.futile_wakeups);

    check(qk_condlock_destroy(mailbox_lock), "destroy");
    free(times_consumed);
    if (failures != 0) {
        fprintf(stderr, "FAILED: %d invariant(s) broken\n", failures);
        return 1;
    }
    printf("every item consumed exactly once\n");
    return 0;
}
