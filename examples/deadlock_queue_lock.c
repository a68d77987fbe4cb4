/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * deadlock_queue_lock.c — a queue's block locks a condition lock that the thread syncing onto
 * that queue holds.
 *
 * A cache thread locks "cache", then syncs onto the serial queue "com.example.io" to read a file.
 * Meanwhile a block already running on that queue wants to update the cache, so it locks "cache".
 * The block waits for the cache thread's lock; the cache thread waits for the block's queue. With
 * dispatch_sync and a mutex (or NSConditionLock) that is a silent hang of both threads and of
 * everything else later submitted to the queue.
 *
 * QueueKit refuses one of the two waits with EDEADLK (whichever closes the ring) and reports both
 * threads, the queue and the lock; the other wait then completes.
 *
 * Exits 0 when exactly one wait was refused and the other completed.
 */
#define _GNU_SOURCE
#include <queuekit.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static qk_queue_t *io;
static qk_condlock_t *cache;
static pthread_barrier_t both_ready;
static int block_status = -1, sync_status = -1, sync_ran;
static pthread_mutex_t done_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static int block_done;

static void print_report(void *context, const char *report) {
    (void)context;
    printf("%s", report);
}

/* Runs on "com.example.io": update the cache. */
static void update_cache(void *context) {
    (void)context;
    pthread_barrier_wait(&both_ready);
    block_status = qk_condlock_lock(cache);
    if (block_status == 0) qk_condlock_unlock(cache);
    pthread_mutex_lock(&done_mutex);
    block_done = 1;
    pthread_cond_signal(&done_cond);
    pthread_mutex_unlock(&done_mutex);
}

static void read_file(void *context) {
    (void)context;
    sync_ran = 1;
}

static void *cache_thread(void *context) {
    (void)context;
    pthread_setname_np(pthread_self(), "cache-filler");
    qk_condlock_lock(cache);
    pthread_barrier_wait(&both_ready);
    sync_status = qk_queue_sync(io, NULL, read_file);
    qk_condlock_unlock(cache);
    return NULL;
}

int main(void) {
    alarm(30);
    qk_set_deadlock_handler(print_report, NULL);
    io = qk_queue_create("com.example.io", QK_QUEUE_SERIAL);
    cache = qk_condlock_create(0);
    qk_condlock_set_name(cache, "cache");
    pthread_barrier_init(&both_ready, NULL, 2);

    qk_queue_async(io, NULL, update_cache);
    pthread_t thread;
    pthread_create(&thread, NULL, cache_thread, NULL);
    pthread_join(thread, NULL);
    pthread_mutex_lock(&done_mutex);
    while (!block_done) pthread_cond_wait(&done_cond, &done_mutex);
    pthread_mutex_unlock(&done_mutex);

    printf("block on io: lock(cache) = %d; cache-filler: sync(io) = %d%s\n", block_status,
           sync_status, sync_ran ? " (ran)" : "");
    int ok = (block_status == EDEADLK && sync_status == 0 && sync_ran) ||
             (block_status == 0 && sync_status == EDEADLK && !sync_ran);
    printf("%s: one wait refused, the other completed (dispatch + mutex: both hang forever)\n",
           ok ? "ok" : "FAIL");
    qk_queue_release(io);
    return ok && qk_condlock_destroy(cache) == 0 ? 0 : 1;
}
