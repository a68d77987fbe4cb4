/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/* What the counting programs share: a kernel table, the one function callgrind counts
 * (`--toggle-collect=measure`), and a main that runs one kernel by name, after a warm-up outside
 * measure(), in a process that has had a second thread (as every real caller: glibc's and
 * dispatch's locks take their atomic paths then). */
#ifndef QUEUEKIT_COUNTS_H
#define QUEUEKIT_COUNTS_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    void (*run)(unsigned long iterations);
} kernel_t;

/* The only function callgrind counts (inclusive): keep it out of line. */
__attribute__((noinline)) void measure(const kernel_t *kernel, unsigned long n) {
    kernel->run(n);
    __asm__ volatile("" ::: "memory");
}

static void *counts_nothing(void *arg) {
    return arg;
}

/* Runs the kernel named by argv[1] for argv[2] iterations: `setup` first (after the second
 * thread), `teardown` last; 2 with a usage message for anything else. */
static int counts_main(int argc, char **argv, const kernel_t *kernels, size_t count,
                       void (*setup)(void), int (*teardown)(void)) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s KERNEL ITERATIONS\n", argv[0]);
        for (size_t i = 0; i < count; i++) fprintf(stderr, "  %s\n", kernels[i].name);
        return 2;
    }
    pthread_t thread;
    pthread_create(&thread, NULL, counts_nothing, NULL);
    pthread_join(thread, NULL);
    setup();
    unsigned long n = strtoul(argv[2], NULL, 10);
    for (size_t i = 0; i < count; i++) {
        if (strcmp(kernels[i].name, argv[1]) != 0) continue;
        kernels[i].run(1000); /* warm-up: records, caches, lazy symbols */
        measure(&kernels[i], n);
        return teardown();
    }
    fprintf(stderr, "unknown kernel %s\n", argv[1]);
    return 2;
}

#endif
