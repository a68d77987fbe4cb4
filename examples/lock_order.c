/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * lock_order.c — the deadlock that has not happened yet.
 *
 * On one code path, thread "saver" writes the DB queue and, inside the write, takes the cache
 * lock. Later, on another path, thread "ui" takes the cache lock and, holding it, reads the DB
 * queue. The two never run at the same time here, so nothing waits and nothing hangs; but the
 * first time they meet in production, the saver waits for the cache while the ui's read waits
 * behind the write: a deadlock.
 *
 * With the lock-order witness on (here qk_set_lock_order_mode; in a test suite, run it with
 * QUEUEKIT_LOCK_ORDER=abort), the second order is reported the moment it is taken, naming both
 * orders, the threads that took them first and where (call sites; this example is linked with
 * -rdynamic so that dladdr can name its functions). The calls themselves succeed: the witness
 * only watches.
 *
 * Exits 0 when exactly one report arrived and every call succeeded.
 */
#define _GNU_SOURCE
#include <queuekit.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static qk_dbqueue_t *db;
static qk_condlock_t *cache;
static int reports, failures;

static void print_report(void *context, const char *report) {
    (void)context;
    reports++;
    printf("%s", report);
}

/* Not static, not inlined: the report names the functions that took each order. */
__attribute__((noinline)) void update_cache(void *context) {
    (void)context;
    if (qk_condlock_lock(cache) != 0 || qk_condlock_unlock(cache) != 0) failures++;
}

__attribute__((noinline)) void read_rows(void *context) {
    (void)context;
}

/* The saver's path: write, and inside the write, the cache. */
__attribute__((noinline)) void save(void) {
    if (qk_dbqueue_write(db, NULL, update_cache) != 0) failures++;
}

/* The ui's path: the cache, and inside it, a read. */
__attribute__((noinline)) void refresh(void) {
    if (qk_condlock_lock(cache) != 0) failures++;
    if (qk_dbqueue_read(db, NULL, read_rows) != 0) failures++;
    if (qk_condlock_unlock(cache) != 0) failures++;
}

static void *run(void *context) {
    const char *name = context;
    pthread_setname_np(pthread_self(), name);
    if (strcmp(name, "saver") == 0)
        save();
    else
        refresh();
    return NULL;
}

static void on_thread(const char *name) {
    pthread_t thread;
    if (pthread_create(&thread, NULL, run, (void *)name) != 0 || pthread_join(thread, NULL) != 0)
        failures++;
}

int main(void) {
    qk_set_lock_order_handler(print_report, NULL);
    qk_set_lock_order_mode(QK_LOCK_ORDER_REPORT);
    db = qk_dbqueue_create("app.db");
    cache = qk_condlock_create(0);
    qk_condlock_set_name(cache, "cache");

    on_thread("saver"); /* Monday's order: DB queue (write) -> cache */
    on_thread("ui");    /* Tuesday's order: cache -> DB queue (read): reported */
    on_thread("ui");    /* the same orders again: reported once only */
    on_thread("saver");

    if (qk_dbqueue_destroy(db) != 0 || qk_condlock_destroy(cache) != 0) failures++;
    printf("lock_order: %d report(s), %d failed call(s)\n", reports, failures);
    return reports == 1 && failures == 0 ? 0 : 1;
}
