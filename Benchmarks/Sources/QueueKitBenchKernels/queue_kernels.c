/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/* The queue's round trips (see include/qkbench.h, "Queue round trips"): every QueueKit kernel
 * here has a libdispatch twin doing the same work the same way, so that a row and its anchor
 * differ only in the library called. */
#define _GNU_SOURCE
#include "qkbench.h"

#include <dispatch/dispatch.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <queuekit.h>

static qkb_sample_t per_op(uint64_t elapsed, uint64_t ops) {
    qkb_sample_t s = {(double)elapsed / (double)ops, -1, -1, -1, -1};
    return s;
}

static void must(int status, const char *what) {
    if (status != 0) {
        fprintf(stderr, "queuekit-bench: %s failed: %d\n", what, status);
        abort();
    }
}

/* The work of every round trip: one increment the compiler cannot drop. */
static void bump(void *context) {
    (*(volatile uint64_t *)context)++;
}

static qk_queue_t *qk_new(qkb_queue_kind_t kind) {
    qk_queue_t *queue = qk_queue_create(
        "bench.queue", kind == QKB_QUEUE_CONCURRENT ? QK_QUEUE_CONCURRENT : QK_QUEUE_SERIAL);
    if (!queue) abort();
    return queue;
}

static dispatch_queue_t gcd_new(qkb_queue_kind_t kind) {
    return dispatch_queue_create("bench.gcd.queue",
                                 kind == QKB_QUEUE_CONCURRENT ? DISPATCH_QUEUE_CONCURRENT : NULL);
}

/* ---- one thread, idle queue -------------------------------------------------------------------- */

qkb_sample_t qkb_qk_queue_round_trip(qkb_queue_kind_t kind, qkb_round_trip_t call,
                                     uint64_t iterations) {
    qk_queue_t *queue = qk_new(kind);
    uint64_t counter = 0;
    int (*fn)(qk_queue_t *, void *, qk_function_t) = call == QKB_BARRIER_SYNC
                                                         ? qk_queue_barrier_sync
                                                     : call == QKB_PERFORM ? qk_queue_perform
                                                                           : qk_queue_sync;
    uint64_t begin = qkb_now_ns();
    for (uint64_t i = 0; i < iterations; i++) fn(queue, &counter, bump);
    uint64_t elapsed = qkb_now_ns() - begin;
    if (counter != iterations) abort();
    qk_queue_release(queue);
    return per_op(elapsed, iterations);
}

qkb_sample_t qkb_gcd_queue_round_trip(qkb_queue_kind_t kind, qkb_round_trip_t call,
                                      uint64_t iterations) {
    dispatch_queue_t queue = gcd_new(kind);
    uint64_t counter = 0;
    void (*fn)(dispatch_queue_t, void *, dispatch_function_t) =
        call == QKB_BARRIER_SYNC ? dispatch_barrier_sync_f : dispatch_sync_f;
    uint64_t begin = qkb_now_ns();
    for (uint64_t i = 0; i < iterations; i++) fn(queue, &counter, bump);
    uint64_t elapsed = qkb_now_ns() - begin;
    if (counter != iterations) abort();
    dispatch_release(queue);
    return per_op(elapsed, iterations);
}

/* ---- perform on the queue the thread is already on ------------------------------------------- */

typedef struct {
    qk_queue_t *queue;
    uint64_t iterations;
    uint64_t counter;
    uint64_t elapsed;
    bool direct;
} inline_t;

static void inline_block(void *context) {
    inline_t *run = context;
    void (*work)(void *) = bump;
    uint64_t begin = qkb_now_ns();
    if (run->direct) {
        for (uint64_t i = 0; i < run->iterations; i++) {
            work(&run->counter);
            __asm__ volatile("" ::: "memory");
        }
    } else {
        for (uint64_t i = 0; i < run->iterations; i++)
            qk_queue_perform(run->queue, &run->counter, work);
    }
    run->elapsed = qkb_now_ns() - begin;
}

/* Inside a block of a serial queue: `qk_queue_perform` onto that queue (inline), or, with
 * `direct`, the same work called directly (the row the extra is measured against). */
qkb_sample_t qkb_qk_perform_inline(bool direct, uint64_t iterations) {
    inline_t run = {.queue = qk_new(QKB_QUEUE_SERIAL), .iterations = iterations, .direct = direct};
    must(qk_queue_sync(run.queue, &run, inline_block), "qk_queue_sync");
    if (run.counter != iterations) abort();
    qk_queue_release(run.queue);
    return per_op(run.elapsed, iterations);
}

/* ---- async ×N then one sync --------------------------------------------------------------------- */

qkb_sample_t qkb_qk_queue_async(uint64_t n) {
    qk_queue_t *queue = qk_new(QKB_QUEUE_SERIAL);
    uint64_t counter = 0;
    uint64_t begin = qkb_now_ns();
    for (uint64_t i = 0; i < n; i++) qk_queue_async(queue, &counter, bump);
    must(qk_queue_sync(queue, &counter, bump), "qk_queue_sync");
    uint64_t elapsed = qkb_now_ns() - begin;
    if (counter != n + 1) abort();
    qk_queue_release(queue);
    return per_op(elapsed, n);
}

qkb_sample_t qkb_gcd_queue_async(uint64_t n) {
    dispatch_queue_t queue = gcd_new(QKB_QUEUE_SERIAL);
    uint64_t counter = 0;
    uint64_t begin = qkb_now_ns();
    for (uint64_t i = 0; i < n; i++) dispatch_async_f(queue, &counter, bump);
    dispatch_sync_f(queue, &counter, bump);
    uint64_t elapsed = qkb_now_ns() - begin;
    if (counter != n + 1) abort();
    dispatch_release(queue);
    return per_op(elapsed, n);
}

/* ---- several threads syncing onto one serial queue ----------------------------------------------- */

typedef struct {
    bool queuekit;
    qk_queue_t *qk;
    dispatch_queue_t gcd;
    uint64_t per_thread;
    uint64_t counter;
    /* The earliest start and the latest end of any thread: the threads' own span, whenever the
     * thread that started them gets to run. */
    _Atomic uint64_t first_start;
    _Atomic uint64_t last_end;
} contended_sync_t;

static void contended_sync_thread(void *context, int index) {
    (void)index;
    contended_sync_t *c = context;
    uint64_t start = qkb_now_ns();
    uint64_t seen = atomic_load(&c->first_start);
    while (start < seen && !atomic_compare_exchange_weak(&c->first_start, &seen, start)) {}
    for (uint64_t i = 0; i < c->per_thread; i++) {
        if (c->queuekit) {
            must(qk_queue_sync(c->qk, &c->counter, bump), "qk_queue_sync");
        } else {
            dispatch_sync_f(c->gcd, &c->counter, bump);
        }
    }
    uint64_t end = qkb_now_ns();
    seen = atomic_load(&c->last_end);
    while (end > seen && !atomic_compare_exchange_weak(&c->last_end, &seen, end)) {}
}

qkb_sample_t qkb_contended_queue_sync(bool queuekit, int threads, uint64_t iterations) {
    contended_sync_t c = {.queuekit = queuekit, .per_thread = iterations / (uint64_t)threads};
    if (queuekit)
        c.qk = qk_new(QKB_QUEUE_SERIAL);
    else
        c.gcd = gcd_new(QKB_QUEUE_SERIAL);
    atomic_init(&c.first_start, UINT64_MAX);
    atomic_init(&c.last_end, 0);
    qkb_run_threads(threads, contended_sync_thread, &c);
    uint64_t elapsed = atomic_load(&c.last_end) - atomic_load(&c.first_start);
    uint64_t total = c.per_thread * (uint64_t)threads;
    if (c.counter != total) abort();
    if (queuekit)
        qk_queue_release(c.qk);
    else
        dispatch_release(c.gcd);
    return per_op(elapsed, total);
}
