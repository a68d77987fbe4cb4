/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/* Instruction counts of the condition lock's uncontended calls beside pthreads': run under
 * callgrind collecting only inside measure() (scripts/condlock-counts.sh), after a warm-up
 * outside it. A kernel's iteration is one pair of calls (an acquisition and its release). */
#include <pthread.h>

#include <queuekit.h>

#include "counts.h"

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

static const kernel_t kernels[] = {
    {"qk_lock_unlock", qk_lock_unlock},
    {"mutex_lock_unlock", mutex_lock_unlock},
    {"qk_lock_when_unlock_with", qk_lock_when_unlock_with},
    {"mutex_cond_when_with", mutex_cond_when_with},
};

static void setup(void) {
    lock = qk_condlock_create(0);
}

static int teardown(void) {
    return qk_condlock_destroy(lock);
}

int main(int argc, char **argv) {
    return counts_main(argc, argv, kernels, sizeof kernels / sizeof *kernels, setup, teardown);
}
