/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * The words a queue owns besides dispatch's: its idle word and its recycled async nodes.
 *
 * The idle word (Queue+Idle.swift) lets a synchronous call run the queue's block on the calling
 * thread, without dispatch, when nothing else of the queue is running or pending. 64 bits:
 *
 *   bits  0-23  the holders: while EXCLUSIVE, the holding thread's number; otherwise how many
 *               threads hold the queue shared (non-barrier blocks of a concurrent queue)
 *   bit     24  EXCLUSIVE: one thread holds the queue alone (a serial queue's block, a barrier)
 *   bit     25  WAITERS: a block dispatch started waits on the futex for the holders to leave
 *   bit     26  CLOSED: a queue targets this one; no thread takes the idle path again
 *   bits 32-63  the blocks submitted to dispatch (async, barrier_async, synchronous calls through
 *               dispatch, actor jobs) that have not finished
 *
 * An idle acquisition succeeds only from a word whose bits above the holders are all 0: nothing
 * submitted is unfinished, nobody waits, nobody holds it in a conflicting way. Every block
 * dispatch runs first waits (futex on the low half, which every release changes) until no idle
 * holder conflicts with it. The low 32 bits are the futex word: little-endian only.
 */
#ifndef QUEUEKIT_SHIM_IDLE_H
#define QUEUEKIT_SHIM_IDLE_H

#include <stdbool.h>
#include <stdint.h>

#include "queuekit_shim.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the idle word's futex half assumes a little-endian machine"
#endif

#define QKSHIM_IDLE_HOLDERS   0x00FFFFFFull
#define QKSHIM_IDLE_EXCLUSIVE (1ull << 24)
#define QKSHIM_IDLE_WAITERS   (1ull << 25)
#define QKSHIM_IDLE_CLOSED    (1ull << 26)
#define QKSHIM_IDLE_SUBMITTED (1ull << 32)

/* A queue's words. `idle` first: a pointer to the struct is a pointer to the idle word. */
typedef struct {
    uint64_t idle;
    /* Recycled async nodes, a stack linked through each node's first word. */
    void *free_nodes;
    /* 1 while a thread takes a node (takers take one at a time: no ABA). */
    uint32_t taking;
} qkshim_queue_words_t;

/* New words (all 0), or NULL when out of memory. */
qkshim_queue_words_t *qkshim_queue_words_create(void);
/* Frees the words and the nodes in the stack (nobody may use them any more). */
void qkshim_queue_words_free(qkshim_queue_words_t *words);

/* A recycled async node, or NULL when there is none or another thread is taking one (the
 * caller allocates one instead of waiting). */
static inline void *qkshim_nodes_take(qkshim_queue_words_t *words) {
    if (__atomic_exchange_n(&words->taking, 1, __ATOMIC_ACQUIRE)) return NULL;
    void *top = __atomic_load_n(&words->free_nodes, __ATOMIC_ACQUIRE);
    /* Only the taker removes nodes, so `top` stays in the stack until this exchange: its link is
     * the one it was pushed with. */
    while (top && !__atomic_compare_exchange_n(&words->free_nodes, &top, *(void **)top, false,
                                               __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE)) {}
    __atomic_store_n(&words->taking, 0, __ATOMIC_RELEASE);
    return top;
}

/* Gives back a node taken or allocated for the queue, once its block ran. */
static inline void qkshim_nodes_give(qkshim_queue_words_t *words, void *node) {
    void *top = __atomic_load_n(&words->free_nodes, __ATOMIC_RELAXED);
    do {
        *(void **)node = top;
    } while (!__atomic_compare_exchange_n(&words->free_nodes, &top, node, false, __ATOMIC_RELEASE,
                                          __ATOMIC_RELAXED));
}

/* Whether a plain dispatch queue was ever registered for DispatchQueue.current (set once, never
 * cleared): only then does an idle hold note which dispatch queue was current at its start. */
extern _Atomic bool qkshim_plain_queue_registered;
static inline bool qkshim_plain_queue_registered_get(void) {
    return __atomic_load_n((bool *)&qkshim_plain_queue_registered, __ATOMIC_RELAXED);
}
static inline void qkshim_plain_queue_registered_set(void) {
    __atomic_store_n((bool *)&qkshim_plain_queue_registered, true, __ATOMIC_RELAXED);
}

/* The calling thread's innermost hold of a queue on the idle path (IdleHold, Queue+Idle.swift). */
extern __thread void *qkshim_tls_idle_hold QKSHIM_TLS;
static inline void *qkshim_idle_hold_get(void) {
    return qkshim_tls_idle_hold;
}
static inline void qkshim_idle_hold_set(void *hold) {
    qkshim_tls_idle_hold = hold;
}

/* Holds the queue alone for thread `thread` if nothing else holds it or is submitted. */
static inline bool qkshim_idle_try_exclusive(uint64_t *word, uint64_t thread) {
    uint64_t idle = 0;
    return thread <= QKSHIM_IDLE_HOLDERS &&
           __atomic_compare_exchange_n(word, &idle, QKSHIM_IDLE_EXCLUSIVE | thread, false,
                                       __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

/* Holds the queue shared if no thread holds it alone and nothing is submitted. */
static inline bool qkshim_idle_try_shared(uint64_t *word) {
    uint64_t seen = __atomic_load_n(word, __ATOMIC_RELAXED);
    while ((seen & ~QKSHIM_IDLE_HOLDERS) == 0 && seen != QKSHIM_IDLE_HOLDERS) {
        if (__atomic_compare_exchange_n(word, &seen, seen + 1, false, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            return true;
    }
    return false;
}

/* The releases' slow paths: something was submitted, or closed, or waits. */
void qkshim_idle_release_exclusive_slow(uint64_t *word);
void qkshim_idle_release_shared_slow(uint64_t *word, uint64_t old);

/* Gives up what qkshim_idle_try_exclusive took. */
static inline void qkshim_idle_release_exclusive(uint64_t *word, uint64_t thread) {
    uint64_t held = QKSHIM_IDLE_EXCLUSIVE | thread;
    if (!__atomic_compare_exchange_n(word, &held, 0, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
        qkshim_idle_release_exclusive_slow(word);
}

/* Gives up what qkshim_idle_try_shared took. */
static inline void qkshim_idle_release_shared(uint64_t *word) {
    uint64_t old = __atomic_fetch_sub(word, 1, __ATOMIC_RELEASE);
    if (old & QKSHIM_IDLE_WAITERS) qkshim_idle_release_shared_slow(word, old);
}

/* A block is about to be submitted to dispatch (before the call that submits it). */
static inline void qkshim_idle_submitting(uint64_t *word) {
    __atomic_fetch_add(word, QKSHIM_IDLE_SUBMITTED, __ATOMIC_RELAXED);
}

/* A submitted block finished (after everything it did). */
static inline void qkshim_idle_finished(uint64_t *word) {
    __atomic_fetch_sub(word, QKSHIM_IDLE_SUBMITTED, __ATOMIC_RELEASE);
}

/* Waits while any holder in `conflicts` holds the queue (slow path of qkshim_idle_starting). */
void qkshim_idle_wait(uint64_t *word, uint64_t conflicts);

/* A block dispatch started: returns once no idle holder conflicts with it (an exclusive block
 * conflicts with every holder, a shared one with an exclusive holder). */
static inline void qkshim_idle_starting(uint64_t *word, bool exclusive) {
    uint64_t conflicts =
        exclusive ? (QKSHIM_IDLE_EXCLUSIVE | QKSHIM_IDLE_HOLDERS) : QKSHIM_IDLE_EXCLUSIVE;
    if (__atomic_load_n(word, __ATOMIC_ACQUIRE) & conflicts) qkshim_idle_wait(word, conflicts);
}

/* A queue now targets this one: no idle acquisition from now on. */
static inline void qkshim_idle_close(uint64_t *word) {
    __atomic_fetch_or(word, QKSHIM_IDLE_CLOSED, __ATOMIC_RELAXED);
}

/* The word's value, for tests and diagnostics. */
static inline uint64_t qkshim_idle_load(uint64_t *word) {
    return __atomic_load_n(word, __ATOMIC_ACQUIRE);
}

#endif
