/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * deadlock_two_queues.c — two serial queues whose blocks sync into each other.
 *
 * Thread 1 runs a block of queue A and, inside it, syncs onto queue B; thread 2 runs a block of
 * B and syncs onto A. With dispatch_sync each waits for the other's block to end: both threads
 * hang forever, silently (no crash, no log; FMDB's reentrancy guard cannot see this either, since
 * each thread is on a different queue than the one it syncs onto).
 *
 * QueueKit sees, at the moment the second thread is about to wait, that the thread holding what it
 * waits for is itself waiting for what it holds: that qk_queue_sync returns EDEADLK without
 * running its work, the deadlock handler gets a report naming both threads, and the other thread
 * proceeds once the refused block returns.
 *
 * Exits 0 when exactly one sync was refused and everything else ran; a watchdog (alarm) fails the
 * program if anything hangs.
 */
#define _GNU_SOURCE
#include <queuekit.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static qk_queue_t *queue_a, *queue_b;
static pthread_barrier_t both_inside;
static int reports;

struct worker {
    const char *name;
    qk_queue_t *own, *other;
    int inner_status;
    int inner_ran;
};

/* The deadlock handler: print the report as it comes (it names threads by number and name). */
static void print_report(void *context, const char *report) {
    (void)context;
    reports++;
    printf("%s", report);
}

static void inner(void *context) {
    ((struct worker *)context)->inner_ran = 1;
}

/* Runs on the worker's own queue: wait until the other worker is inside its block, then sync. */
static void outer(void *context) {
    struct worker *worker = context;
    pthread_barrier_wait(&both_inside);
    worker->inner_status = qk_queue_sync(worker->other, worker, inner);
}

static void *run_worker(void *context) {
    struct worker *worker = context;
    pthread_setname_np(pthread_self(), worker->name);
    qk_queue_sync(worker->own, worker, outer);
    return NULL;
}

int main(void) {
    alarm(30); /* a hang would be a bug: fail instead of waiting forever */
    qk_set_deadlock_handler(print_report, NULL);
    queue_a = qk_queue_create("com.example.a", QK_QUEUE_SERIAL);
    queue_b = qk_queue_create("com.example.b", QK_QUEUE_SERIAL);
    pthread_barrier_init(&both_inside, NULL, 2);

    struct worker one = {.name = "worker-a", .own = queue_a, .other = queue_b};
    struct worker two = {.name = "worker-b", .own = queue_b, .other = queue_a};
    pthread_t t1, t2;
    pthread_create(&t1, NULL, run_worker, &one);
    pthread_create(&t2, NULL, run_worker, &two);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);

    printf("worker-a: sync(b) = %s%s\n", one.inner_status ? qk_strerror(one.inner_status) : "0",
           one.inner_ran ? " (ran)" : " (did not run)");
    printf("worker-b: sync(a) = %s%s\n", two.inner_status ? qk_strerror(two.inner_status) : "0",
           two.inner_ran ? " (ran)" : " (did not run)");
    int refused = (one.inner_status == EDEADLK) + (two.inner_status == EDEADLK);
    int ok = refused == 1 && reports == 1 && one.inner_ran + two.inner_ran == 1 &&
             (one.inner_status == 0 || two.inner_status == 0);
    printf(
        "%s: exactly one sync refused, the other ran (dispatch_sync: both threads hang forever)\n",
        ok ? "ok" : "FAIL");
    qk_queue_release(queue_a);
    qk_queue_release(queue_b);
    return ok ? 0 : 1;
}
