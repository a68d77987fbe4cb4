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

static void bump(void *context) {
    (*(volatile unsigned long *)context)++;
}

typedef struct {
    const char *name;
    void (*run)(unsigned long iterations);
} kernel_t;

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

/* The only function callgrind counts (inclusive): keep it out of line. */
__attribute__((noinline)) void measure(const kernel_t *kernel, unsigned long n) {
    kernel->run(n);
    __asm__ volatile("" ::: "memory");
}

static void *nothing(void *arg) {
    return arg;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s KERNEL ITERATIONS\n", argv[0]);
        for (size_t i = 0; i < sizeof kernels / sizeof *kernels; i++)
            fprintf(stderr, "  %s\n", kernels[i].name);
        return 2;
    }
    /* Multithreaded, as every real caller: dispatch and QueueKit take their threaded paths. */
    pthread_t thread;
    pthread_create(&thread, NULL, nothing, NULL);
    pthread_join(thread, NULL);
    qk_serial = qk_queue_create("count.serial", QK_QUEUE_SERIAL);
    qk_concurrent = qk_queue_create("count.concurrent", QK_QUEUE_CONCURRENT);
    gcd_serial = dispatch_queue_create("count.gcd.serial", NULL);
    gcd_concurrent = dispatch_queue_create("count.gcd.concurrent", DISPATCH_QUEUE_CONCURRENT);
    unsigned long n = strtoul(argv[2], NULL, 10);
    for (size_t i = 0; i < sizeof kernels / sizeof *kernels; i++) {
        if (strcmp(kernels[i].name, argv[1]) != 0) continue;
        kernels[i].run(1000); /* warm-up: records, caches, lazy symbols */
        measure(&kernels[i], n);
        return 0;
    }
    fprintf(stderr, "unknown kernel %s\n", argv[1]);
    return 2;
}
