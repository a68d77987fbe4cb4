/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * deadlock_lock_order.c — two condition locks taken in opposite orders.
 *
 * Thread 1 locks "accounts" then "ledger"; thread 2 locks "ledger" then "accounts". If each gets
 * its first lock before the other's second, NSConditionLock and pthread mutexes hang both threads
 * forever (TSan would report the lock-order inversion afterwards, in a test build, if it ran).
 *
 * QueueKit refuses the one lock call that would close the ring: it returns EDEADLK holding
 * nothing, the handler prints who held and waited for what, and the refused thread backs off
 * (releases its first lock), which lets the other finish.
 *
 * Exits 0 when exactly one call was refused and the other thread got both locks.
 */
#define _GNU_SOURCE
#include <queuekit.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static qk_condlock_t *accounts, *ledger;
static pthread_barrier_t both_hold_one;

struct transfer {
    const char *name;
    qk_condlock_t *first, *second;
    int second_status;
};

static void print_report(void *context, const char *report) {
    (void)context;
    printf("%s", report);
}

static void *run_transfer(void *context) {
    struct transfer *transfer = context;
    pthread_setname_np(pthread_self(), transfer->name);
    qk_condlock_lock(transfer->first);
    pthread_barrier_wait(&both_hold_one);
    transfer->second_status = qk_condlock_lock(transfer->second);
    if (transfer->second_status == 0) {
        /* ... the transfer itself ... */
        qk_condlock_unlock(transfer->second);
    }
    /* Refused: nothing was taken; back off by releasing the first lock (retry later). */
    qk_condlock_unlock(transfer->first);
    return NULL;
}

int main(void) {
    alarm(30);
    qk_set_deadlock_handler(print_report, NULL);
    accounts = qk_condlock_create(0);
    ledger = qk_condlock_create(0);
    qk_condlock_set_name(accounts, "accounts");
    qk_condlock_set_name(ledger, "ledger");
    pthread_barrier_init(&both_hold_one, NULL, 2);

    struct transfer one = {.name = "transfer-1", .first = accounts, .second = ledger};
    struct transfer two = {.name = "transfer-2", .first = ledger, .second = accounts};
    pthread_t t1, t2;
    pthread_create(&t1, NULL, run_transfer, &one);
    pthread_create(&t2, NULL, run_transfer, &two);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);

    printf("transfer-1: lock(ledger) = %d, transfer-2: lock(accounts) = %d\n", one.second_status,
           two.second_status);
    int ok = (one.second_status == EDEADLK && two.second_status == 0) ||
             (one.second_status == 0 && two.second_status == EDEADLK);
    printf("%s: one lock call refused with EDEADLK, the other thread got both locks "
           "(pthread/NSConditionLock: both threads hang forever)\n",
           ok ? "ok" : "FAIL");
    int destroyed = qk_condlock_destroy(accounts) == 0 && qk_condlock_destroy(ledger) == 0;
    return ok && destroyed ? 0 : 1;
}
