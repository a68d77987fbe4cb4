/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/* Instruction counts of the condition lock's uncontended calls beside pthreads': run under
 * callgrind collecting only inside measure() (scripts/condlock-counts.sh), after a warm-up
 * outside it. A kernel's iteration is one pair of calls (an acquisition and its release). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <queuekit.h>

static qk_condlock_t *lock;
static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static long condition;

static void qk_lock_unlock(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) {
        qk_condlock_lock(lock);
        qk_condlock_unlock(lock);
    }
}

static void qk_lock_when_unlock_with(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) {
        qk_condlock_lock_when(lock, 0);
        qk_condlock_unlock_with(lock, 0);
    }
}

static void mutex_lock_unlock(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) {
        pthread_mutex_lock(&mutex);
        pthread_mutex_unlock(&mutex);
    }
}

/* lock_when + unlock_with as C programmers write it: a mutex, a loop on a condition variable, a
 * broadcast after the change. */
static void mutex_cond_when_with(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) {
        pthread_mutex_lock(&mutex);
        while (condition != 0) pthread_cond_wait(&changed, &mutex);
        condition = 0;
        pthread_cond_broadcast(&changed);
        pthread_mutex_unlock(&mutex);
    }
}

typedef struct {
    const char *name;
    void (*run)(unsigned long iterations);
} kernel_t;

static const kernel_t kernels[] = {
    {"qk_lock_unlock", qk_lock_unlock},
    {"mutex_lock_unlock", mutex_lock_unlock},
    {"qk_lock_when_unlock_with", qk_lock_when_unlock_with},
    {"mutex_cond_when_with", mutex_cond_when_with},
};

__attribute__((noinline)) void measure(const kernel_t *kernel, unsigned long n) {
    kernel->run(n);
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
    /* Multithreaded, as every real caller: glibc's locks take their atomic paths. */
    pthread_t thread;
    pthread_create(&thread, NULL, nothing, NULL);
    pthread_join(thread, NULL);
    lock = qk_condlock_create(0);
    unsigned long n = strtoul(argv[2], NULL, 10);
    for (size_t i = 0; i < sizeof kernels / sizeof *kernels; i++) {
        if (strcmp(kernels[i].name, argv[1]) != 0) continue;
        kernels[i].run(1000); /* warm-up: the thread's record, caches, lazy symbols */
        measure(&kernels[i], n);
        return qk_condlock_destroy(lock);
    }
    fprintf(stderr, "unknown kernel %s\n", argv[1]);
    return 2;
}
