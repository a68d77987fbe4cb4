/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/* A queue's words, and the slow paths of its idle word (see queuekit_shim_idle.h). */
#include "queuekit_shim_idle.h"

#include <limits.h>
#include <stdlib.h>

__thread void *qkshim_tls_idle_hold QKSHIM_TLS;
_Atomic bool qkshim_plain_queue_registered;

qkshim_queue_words_t *qkshim_queue_words_create(void) {
    return calloc(1, sizeof(qkshim_queue_words_t));
}

void qkshim_queue_words_free(qkshim_queue_words_t *words) {
    void *node = words->free_nodes;
    while (node) {
        void *next = *(void **)node;
        free(node);
        node = next;
    }
    free(words);
}

static uint32_t *qkshim_idle_futex(uint64_t *word) {
    return (uint32_t *)word; /* the low half: little-endian (see the header) */
}

void qkshim_idle_release_exclusive_slow(uint64_t *word) {
    uint64_t old = __atomic_fetch_and(
        word, ~(QKSHIM_IDLE_HOLDERS | QKSHIM_IDLE_EXCLUSIVE | QKSHIM_IDLE_WAITERS),
        __ATOMIC_RELEASE);
    if (old & QKSHIM_IDLE_WAITERS) qkshim_futex_wake(qkshim_idle_futex(word), INT_MAX);
}

void qkshim_idle_release_shared_slow(uint64_t *word, uint64_t old) {
    /* Only the last holder to leave wakes the waiters; no holder can join while one waits. */
    if ((old & QKSHIM_IDLE_HOLDERS) != 1) return;
    uint64_t seen = __atomic_fetch_and(word, ~QKSHIM_IDLE_WAITERS, __ATOMIC_RELAXED);
    if (seen & QKSHIM_IDLE_WAITERS) qkshim_futex_wake(qkshim_idle_futex(word), INT_MAX);
}

/* Polls before sleeping: a holder on the idle path usually leaves within a short block, and a
 * futex wait and wake cost two system calls. */
enum { QKSHIM_IDLE_POLLS = 128 };

void qkshim_idle_wait(uint64_t *word, uint64_t conflicts) {
    uint64_t seen = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    for (int polls = 0; (seen & conflicts) && polls < QKSHIM_IDLE_POLLS; polls++) {
        qkshim_cpu_relax();
        seen = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    }
    while (seen & conflicts) {
        /* Announce the wait, then sleep unless the low half changed meanwhile: every release
         * changes it, and wakes the waiters it finds announced. */
        if (!(seen & QKSHIM_IDLE_WAITERS)) {
            if (!__atomic_compare_exchange_n(word, &seen, seen | QKSHIM_IDLE_WAITERS, false,
                                             __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE))
                continue;
            seen |= QKSHIM_IDLE_WAITERS;
        }
        qkshim_futex_wait(qkshim_idle_futex(word), (uint32_t)seen, UINT64_MAX);
        seen = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    }
}
