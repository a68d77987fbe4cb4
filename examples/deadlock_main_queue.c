/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * deadlock_main_queue.c — a worker syncs onto the main queue while the main thread syncs onto the
 * worker's queue.
 *
 * The main thread (before it hands itself to dispatch with qk_main) is the main queue: a block
 * synced onto the main queue can only run when the main thread gets to it. A worker running a
 * block of "com.example.worker" syncs onto the main queue ("update the UI"), while the main thread
 * syncs onto "com.example.worker" ("fetch the model"). With dispatch both wait forever: the
 * classic frozen app.
 *
 * QueueKit refuses whichever sync closes the ring, with a report. If the worker's sync is
 * refused, its block returns and the main thread's sync runs. If the main thread's is refused,
 * the main thread goes on and hands itself to dispatch (qk_main), which runs the worker's main
 * queue block: nothing is lost either way.
 *
 * Exits 0 when exactly one sync was refused and every block that was not refused ran.
 */
#define _GNU_SOURCE
#include <queuekit.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static qk_queue_t *worker_queue;
static pthread_barrier_t both_ready;
static int worker_status = -1, worker_ran, main_status = -1, main_ran;

static void print_report(void *context, const char *report) {
    (void)context;
    printf("%s", report);
}

static void finish(void) {
    printf("worker: sync(main) = %d%s; main: sync(worker) = %d%s\n", worker_status,
           worker_ran ? " (ran)" : "", main_status, main_ran ? " (ran)" : "");
    int ok = (worker_status == EDEADLK && !worker_ran && main_status == 0 && main_ran) ||
             (main_status == EDEADLK && !main_ran && worker_status == 0 && worker_ran);
    printf("%s: one sync refused, the other ran (dispatch: the app freezes)\n", ok ? "ok" : "FAIL");
    fflush(stdout);
    exit(ok ? 0 : 1);
}

static void update_ui(void *context) {
    (void)context;
    worker_ran = 1;
}

/* Runs on "com.example.worker". */
static void worker_block(void *context) {
    (void)context;
    pthread_barrier_wait(&both_ready);
    worker_status = qk_queue_sync(qk_queue_main(), NULL, update_ui);
}

static void *worker(void *context) {
    (void)context;
    pthread_setname_np(pthread_self(), "worker");
    qk_queue_sync(worker_queue, NULL, worker_block);
    /* The main thread is in qk_main (it was refused): end here. */
    if (__atomic_load_n(&main_status, __ATOMIC_ACQUIRE) == EDEADLK) finish();
    return NULL;
}

static void fetch_model(void *context) {
    (void)context;
    main_ran = 1;
}

int main(void) {
    alarm(30);
    qk_set_deadlock_handler(print_report, NULL);
    worker_queue = qk_queue_create("com.example.worker", QK_QUEUE_SERIAL);
    pthread_barrier_init(&both_ready, NULL, 2);
    pthread_t thread;
    pthread_create(&thread, NULL, worker, NULL);
    pthread_barrier_wait(&both_ready);
    __atomic_store_n(&main_status, qk_queue_sync(worker_queue, NULL, fetch_model),
                     __ATOMIC_RELEASE);
    if (main_status == EDEADLK) qk_main(); /* runs the worker's main-queue block; never returns */
    pthread_join(thread, NULL);
    finish();
}
