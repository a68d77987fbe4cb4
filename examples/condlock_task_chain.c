/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * condlock_task_chain.c — tasks that must run in order A → B → C, on one condition lock.
 *
 * The condition names how far the chain has got: IDLE, A_DONE, B_DONE, C_DONE. Task B waits for
 * A_DONE and releases with B_DONE; task C waits for B_DONE and releases with C_DONE. The threads
 * are started in the "wrong" order (C first) and with random amounts of work, yet they always run
 * A, B, C: the order comes from the condition, not from scheduling.
 *
 * Task A has no predecessor, so it never locks. With NSConditionLock the original pattern starts the chain
 * with an unlockWithCondition: on a lock A never held; QueueKit checks ownership and refuses that
 * (EPERM, shown below), and offers qk_condlock_set(lock, A_DONE) instead: lock, then
 * unlock_with(A_DONE), from any thread that does not hold the lock.
 *
 * Usage: condlock_task_chain [rounds]   (default 200, at most 10000)
 * Exits 0 when every round ran A, B, C in order, 1 otherwise.
 */
#include <queuekit.h>

#include <bsd/stdlib.h> /* strtonum, arc4random_uniform */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

enum { IDLE = 0, A_DONE = 1, B_DONE = 2, C_DONE = 3 };

static qk_condlock_t *chain;
static char order[4]; /* the tasks in the order they ran; guarded by the chain's hand-offs */
static int ran;

static void check(int status, const char *what) {
    if (status != 0) {
        fprintf(stderr, "%s: %s\n", what, qk_strerror(status));
        exit(1);
    }
}

/* A little work of random length, so that the threads race. */
static void work(void) {
    volatile unsigned sink = 0;
    unsigned spins = arc4random_uniform(20000), i;
    for (i = 0; i < spins; i++) sink += i;
}

static void *task_a(void *unused) {
    (void)unused;
    work();
    order[ran++] = 'A';
    /* A never held the lock: start the chain with set, not with an unheld unlock_with. */
    check(qk_condlock_set(chain, A_DONE), "A: set(A_DONE)");
    return NULL;
}

static void *task_b(void *unused) {
    (void)unused;
    check(qk_condlock_lock_when(chain, A_DONE), "B: lock_when(A_DONE)");
    work();
    order[ran++] = 'B';
    check(qk_condlock_unlock_with(chain, B_DONE), "B: unlock_with(B_DONE)");
    return NULL;
}

static void *task_c(void *unused) {
    (void)unused;
    check(qk_condlock_lock_when(chain, B_DONE), "C: lock_when(B_DONE)");
    work();
    order[ran++] = 'C';
    check(qk_condlock_unlock_with(chain, C_DONE), "C: unlock_with(C_DONE)");
    return NULL;
}

int main(int argc, char **argv) {
    long long rounds = 200, round;
    int failures = 0;

    if (argc > 1) {
        const char *error = NULL;
        rounds = strtonum(argv[1], 1, 10000, &error);
        if (error != NULL) {
            fprintf(stderr, "rounds is %s: %s\n", error, argv[1]);
            return 2;
        }
    }
    chain = qk_condlock_create(IDLE);
    if (chain == NULL) {
        perror("qk_condlock_create");
        return 1;
    }

    /* The NSConditionLock shortcut is a misuse here: unlocking a lock nobody holds. */
    if (qk_condlock_unlock_with(chain, A_DONE) != EPERM || qk_condlock_condition(chain) != IDLE) {
        fprintf(stderr, "an unheld unlock_with was not refused\n");
        failures++;
    }

    for (round = 0; round < rounds; round++) {
        pthread_t a, b, c;
        ran = 0;
        /* Start the later tasks first: the condition, not the start order, decides. */
        if (pthread_create(&c, NULL, task_c, NULL) != 0 ||
            pthread_create(&b, NULL, task_b, NULL) != 0 ||
            pthread_create(&a, NULL, task_a, NULL) != 0) {
            perror("pthread_create");
            return 1;
        }
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        pthread_join(c, NULL);

        /* Every join is a full barrier, so reading what the tasks wrote is safe here. */
        if (ran != 3 || order[0] != 'A' || order[1] != 'B' || order[2] != 'C' ||
            qk_condlock_condition(chain) != C_DONE) {
            fprintf(stderr, "round %lld ran %.*s\n", round, ran, order);
            failures++;
        }
        /* Reset for the next round: a thread that does not hold the lock uses set. */
        check(qk_condlock_set(chain, IDLE), "set(IDLE)");
    }

    check(qk_condlock_destroy(chain), "destroy");
    if (failures != 0) {
        fprintf(stderr, "FAILED: %d round(s) out of order\n", failures);
        return 1;
    }
    printf("%lld rounds, every one ran A -> B -> C\n", rounds);
    return 0;
}
