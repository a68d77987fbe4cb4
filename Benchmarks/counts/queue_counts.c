/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/* Instruction counts per queue round trip, QueueKit next to libdispatch: run under
 * `valgrind --tool=callgrind --toggle-collect=measure` (scripts/queue-counts.sh), which counts
 * only what runs inside measure(): `iterations` calls of one kind, after a warm-up outside it. */
#define _GNU_SOURCE
#include <dispatch/dispatch.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <queuekit.h>

#include "counts.h"

static void bump(void *context) {
    (*(volatile unsigned long *)context)++;
}

static qk_queue_t *qk_serial, *qk_concurrent;
static dispatch_queue_t gcd_serial, gcd_concurrent;
static unsigned long counter;

static void qk_sync_serial(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) qk_queue_sync(qk_serial, &counter, bump);
}
static void qk_sync_concurrent(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) qk_queue_sync(qk_concurrent, &counter, bump);
}
static void qk_barrier(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) qk_queue_barrier_sync(qk_concurrent, &counter, bump);
}
static void qk_perform(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) qk_queue_perform(qk_serial, &counter, bump);
}
static void qk_async(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) qk_queue_async(qk_serial, &counter, bump);
    qk_queue_sync(qk_serial, &counter, bump);
}
static void gcd_sync_serial(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) dispatch_sync_f(gcd_serial, &counter, bump);
}
static void gcd_sync_concurrent(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) dispatch_sync_f(gcd_concurrent, &counter, bump);
}
static void gcd_barrier(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) dispatch_barrier_sync_f(gcd_concurrent, &counter, bump);
}
static void gcd_async(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) dispatch_async_f(gcd_serial, &counter, bump);
    dispatch_sync_f(gcd_serial, &counter, bump);
}
static void direct(unsigned long n) {
    void (*volatile fn)(void *) = bump;
    for (unsigned long i = 0; i < n; i++) fn(&counter);
}

static unsigned long inline_n;
static void qk_perform_inline_block(void *context) {
    (void)context;
    for (unsigned long i = 0; i < inline_n; i++) qk_queue_perform(qk_serial, &counter, bump);
}
static void qk_perform_inline(unsigned long n) {
    inline_n = n;
    qk_queue_sync(qk_serial, NULL, qk_perform_inline_block);
}

static const kernel_t kernels[] = {
    {"qk_sync_serial", qk_sync_serial},
    {"gcd_sync_serial", gcd_sync_serial},
    {"qk_sync_concurrent", qk_sync_concurrent},
    {"gcd_sync_concurrent", gcd_sync_concurrent},
    {"qk_barrier_sync", qk_barrier},
    {"gcd_barrier_sync", gcd_barrier},
    {"qk_perform_outside", qk_perform},
    {"qk_perform_inline", qk_perform_inline},
    {"direct_call", direct},
    {"qk_async", qk_async},
    {"gcd_async", gcd_async},
};

static void setup(void) {
    qk_serial = qk_queue_create("count.serial", QK_QUEUE_SERIAL);
    qk_concurrent = qk_queue_create("count.concurrent", QK_QUEUE_CONCURRENT);
    gcd_serial = dispatch_queue_create("count.gcd.serial", NULL);
    gcd_concurrent = dispatch_queue_create("count.gcd.concurrent", DISPATCH_QUEUE_CONCURRENT);
}

static int teardown(void) {
    return 0;
}

int main(int argc, char **argv) {
    return counts_main(argc, argv, kernels, sizeof kernels / sizeof *kernels, setup, teardown);
}
