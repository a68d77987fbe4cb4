/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * deadlock_dbqueue_reader.c — a DB-queue reader syncs onto a queue whose block writes the DB queue.
 *
 * A request thread reads the store (qk_dbqueue_read) and, inside the read, syncs onto the serial
 * queue "com.example.cache" to look something up. Meanwhile a block already running on that queue
 * writes the store (qk_dbqueue_write). The write waits for the reader to leave; the reader waits
 * for the queue's block to end. With a dispatch_sync/dispatch_barrier reader-writer queue (or
 * FMDB/GRDB-style database queues) both threads hang forever, and so does every later read of the
 * store, queued behind the waiting write.
 *
 * QueueKit refuses whichever of the two waits closes the ring (EDEADLK, nothing run, nothing
 * taken) and reports both threads; the other call then completes.
 *
 * Exits 0 when exactly one call was refused and the other ran.
 */
#define _GNU_SOURCE
#include <queuekit.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static qk_dbqueue_t *store;
static qk_queue_t *cache;
static pthread_barrier_t both_inside;
static int read_sync_status = -1, read_sync_ran, write_status = -1, write_ran;

static void print_report(void *context, const char *report) {
    (void)context;
    printf("%s", report);
}

static void look_up(void *context) {
    (void)context;
    read_sync_ran = 1;
}

/* Inside the read: sync onto the cache queue. */
static void read_request(void *context) {
    (void)context;
    pthread_barrier_wait(&both_inside);
    read_sync_status = qk_queue_sync(cache, NULL, look_up);
}

static void *request_thread(void *context) {
    (void)context;
    pthread_setname_np(pthread_self(), "request");
    qk_dbqueue_read(store, NULL, read_request);
    return NULL;
}

static void save(void *context) {
    (void)context;
    write_ran = 1;
}

/* A block of the cache queue: write the store. */
static void refresh(void *context) {
    (void)context;
    pthread_barrier_wait(&both_inside);
    write_status = qk_dbqueue_write(store, NULL, save);
}

static void *refresh_thread(void *context) {
    (void)context;
    pthread_setname_np(pthread_self(), "refresher");
    qk_queue_sync(cache, NULL, refresh);
    return NULL;
}

int main(void) {
    alarm(30);
    qk_set_deadlock_handler(print_report, NULL);
    store = qk_dbqueue_create("com.example.store");
    cache = qk_queue_create("com.example.cache", QK_QUEUE_SERIAL);
    pthread_barrier_init(&both_inside, NULL, 2);
    pthread_t request, refresher;
    pthread_create(&request, NULL, request_thread, NULL);
    pthread_create(&refresher, NULL, refresh_thread, NULL);
    pthread_join(request, NULL);
    pthread_join(refresher, NULL);

    printf(
        "request: sync(cache) inside the read = %d%s; refresher: write inside the block = %d%s\n",
        read_sync_status, read_sync_ran ? " (ran)" : "", write_status, write_ran ? " (ran)" : "");
    int ok = (read_sync_status == EDEADLK && !read_sync_ran && write_status == 0 && write_ran) ||
             (write_status == EDEADLK && !write_ran && read_sync_status == 0 && read_sync_ran);
    printf(
        "%s: one call refused, the other ran (a dispatch reader-writer queue: both hang, and every "
        "later read with them)\n",
        ok ? "ok" : "FAIL");
    int destroyed = qk_dbqueue_destroy(store) == 0;
    qk_queue_release(cache);
    return ok && destroyed ? 0 : 1;
}
