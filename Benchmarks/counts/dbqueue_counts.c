/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/* Instruction counts of the DB queue's reads and writes: run under callgrind with its counters
 * zeroed as measure() starts and dumped as it returns (scripts/dbqueue-counts.sh), after a
 * warm-up outside it. The single-threaded kernels count one path each; the mixed kernels run
 * reads and synchronous writes (`WRITE_PERCENT` in 100) from several threads, for the
 * per-function breakdown of what a write costs the readers. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <queuekit.h>

static unsigned long counter;

static void bump(void *context) {
    (*(volatile unsigned long *)context)++;
}

typedef struct {
    const char *name;
    void (*run)(unsigned long iterations);
    /* Outside the measurement, around the warm-up and measure() (optional). */
    void (*setup)(void);
    void (*teardown)(void);
} kernel_t;

static qk_dbqueue_t *db;

/* Reads, the queue read-biased (readers in slots). */
static void read_biased(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) qk_dbqueue_read(db, &counter, bump);
}

/* Reads right after a write (the reads that a write leaves behind it), one write per `n`. */
static void read_after_write(unsigned long n) {
    qk_dbqueue_write(db, &counter, bump);
    for (unsigned long i = 0; i < n; i++) qk_dbqueue_read(db, &counter, bump);
}

/* Counted reads: every slot is held by a reader parked in its read (one thread per slot number,
 * as many as the largest slot array), so the measuring thread's slot is taken. */
enum { SLOT_HOLDERS = 256 };
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cond = PTHREAD_COND_INITIALIZER;
static int holders_in, holders_go;

static void hold_slot(void *context) {
    (void)context;
    pthread_mutex_lock(&hold_lock);
    holders_in++;
    pthread_cond_broadcast(&hold_cond);
    while (!holders_go) pthread_cond_wait(&hold_cond, &hold_lock);
    pthread_mutex_unlock(&hold_lock);
}

static void *slot_holder(void *arg) {
    qk_dbqueue_read(db, arg, hold_slot);
    return NULL;
}

static pthread_t holders[SLOT_HOLDERS];

static void hold_slots(void) {
    for (int t = 0; t < SLOT_HOLDERS; t++) pthread_create(&holders[t], NULL, slot_holder, NULL);
    pthread_mutex_lock(&hold_lock);
    while (holders_in < SLOT_HOLDERS) pthread_cond_wait(&hold_cond, &hold_lock);
    pthread_mutex_unlock(&hold_lock);
}

static void release_slots(void) {
    pthread_mutex_lock(&hold_lock);
    holders_go = 1;
    pthread_cond_broadcast(&hold_cond);
    pthread_mutex_unlock(&hold_lock);
    for (int t = 0; t < SLOT_HOLDERS; t++) pthread_join(holders[t], NULL);
}

static void read_counted(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) qk_dbqueue_read(db, &counter, bump);
}

/* A write, then a read: the read is the counted one a write leaves behind it. */
static void write_then_read(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) {
        qk_dbqueue_write(db, &counter, bump);
        qk_dbqueue_read(db, &counter, bump);
    }
}

static void write_sync(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) qk_dbqueue_write(db, &counter, bump);
}

static unsigned long nested_n;
static void nested_block(void *context) {
    (void)context;
    for (unsigned long i = 0; i < nested_n; i++) qk_dbqueue_read(db, &counter, bump);
}
/* Reads inside a read: the inline path. */
static void read_nested(unsigned long n) {
    nested_n = n;
    qk_dbqueue_read(db, NULL, nested_block);
}

static void direct(unsigned long n) {
    void (*volatile fn)(void *) = bump;
    for (unsigned long i = 0; i < n; i++) fn(&counter);
}

/* Mixed reads and synchronous writes, `write_percent` in 100, from `threads` threads. */
static int write_percent = 10;
static unsigned long per_thread;

static void mixed_ops(long index) {
    unsigned long long x = 0x9E3779B97F4A7C15ull * (unsigned long long)(index + 1);
    for (unsigned long i = 0; i < per_thread; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if ((int)(x % 100) >= write_percent)
            qk_dbqueue_read(db, &counter, bump);
        else
            qk_dbqueue_write(db, &counter, bump);
    }
}

static void *mixed_thread(void *arg) {
    mixed_ops((long)arg);
    return NULL;
}

static void mixed(unsigned long n, int threads) {
    pthread_t tids[16];
    per_thread = n / (unsigned long)threads;
    for (long t = 0; t < threads; t++) pthread_create(&tids[t], NULL, mixed_thread, (void *)t);
    for (int t = 0; t < threads; t++) pthread_join(tids[t], NULL);
}
static void mixed_1(unsigned long n) {
    mixed(n, 1);
}
static void mixed_4(unsigned long n) {
    mixed(n, 4);
}
static void mixed_8(unsigned long n) {
    mixed(n, 8);
}

static const kernel_t kernels[] = {
    {"read", read_biased},
    {"read_after_write", read_after_write},
    {"read_counted", read_counted, hold_slots, release_slots},
    {"write_then_read", write_then_read},
    {"read_nested", read_nested},
    {"write", write_sync},
    {"direct_call", direct},
    {"mixed_1", mixed_1},
    {"mixed_4", mixed_4},
    {"mixed_8", mixed_8},
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
    if (argc < 3) {
        fprintf(stderr, "usage: %s KERNEL ITERATIONS [WRITE_PERCENT]\n", argv[0]);
        for (size_t i = 0; i < sizeof kernels / sizeof *kernels; i++)
            fprintf(stderr, "  %s\n", kernels[i].name);
        return 2;
    }
    if (argc > 3) write_percent = atoi(argv[3]);
    /* Multithreaded, as every real caller. */
    pthread_t thread;
    pthread_create(&thread, NULL, nothing, NULL);
    pthread_join(thread, NULL);
    db = qk_dbqueue_create("count.db");
    unsigned long n = strtoul(argv[2], NULL, 10);
    for (size_t i = 0; i < sizeof kernels / sizeof *kernels; i++) {
        if (strcmp(kernels[i].name, argv[1]) != 0) continue;
        if (kernels[i].setup) kernels[i].setup();
        kernels[i].run(1000); /* warm-up: records, caches, lazy symbols */
        measure(&kernels[i], n);
        if (kernels[i].teardown) kernels[i].teardown();
        return qk_dbqueue_destroy(db) == 0 ? 0 : 1;
    }
    fprintf(stderr, "unknown kernel %s\n", argv[1]);
    return 2;
}
