/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * The lock-order witness's platform seam (see Diagnostics/LockOrder/): its mode byte, read on
 * every acquisition and release, the calling thread's state pointer (an initial-exec
 * thread-local), the call-site lookup (backtrace and dladdr) and the environment variable. No
 * logic lives here beyond parsing QUEUEKIT_LOCK_ORDER.
 */
#ifndef QUEUEKIT_SHIM_LOCKORDER_H
#define QUEUEKIT_SHIM_LOCKORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "queuekit_shim.h"

/* The witness's mode: 0 off, 1 report, 2 abort (the values of qk_lock_order_mode_t). Set from
 * QUEUEKIT_LOCK_ORDER when the library is loaded, then only by LockOrder.swift (one change at a
 * time). A plain global, so the off check on a fast path is one relaxed load and one branch. The
 * setter keeps the slow-paths byte's bit in step: set before the witness turns on, cleared after
 * it turned off. */
extern _Atomic uint8_t qkshim_lockorder_mode;
static inline uint8_t qkshim_lockorder_mode_get(void) {
    return __atomic_load_n((uint8_t *)&qkshim_lockorder_mode, __ATOMIC_RELAXED);
}
static inline void qkshim_lockorder_mode_set(uint8_t mode) {
    if (mode != 0) qkshim_slow_paths_change(QKSHIM_SLOW_LOCK_ORDER, true);
    __atomic_store_n((uint8_t *)&qkshim_lockorder_mode, mode, __ATOMIC_RELAXED);
    if (mode == 0) qkshim_slow_paths_change(QKSHIM_SLOW_LOCK_ORDER, false);
}

/* Bumped whenever a cached edge may have become stale (a node forgotten, the graph dropped or
 * started afresh, a fork): a thread's edge cache keeps only entries of the current epoch. */
extern _Atomic uint64_t qkshim_lockorder_epoch;
static inline uint64_t qkshim_lockorder_epoch_get(void) {
    return __atomic_load_n((uint64_t *)&qkshim_lockorder_epoch, __ATOMIC_RELAXED);
}
static inline void qkshim_lockorder_epoch_bump(void) {
    __atomic_fetch_add((uint64_t *)&qkshim_lockorder_epoch, 1, __ATOMIC_RELAXED);
}

/* The witness's session: bumped each time it is turned on, so a thread's held set from before
 * (objects taken while it was off) counts as empty. */
extern _Atomic uint64_t qkshim_lockorder_session;
static inline uint64_t qkshim_lockorder_session_get(void) {
    return __atomic_load_n((uint64_t *)&qkshim_lockorder_session, __ATOMIC_RELAXED);
}
static inline void qkshim_lockorder_session_bump(void) {
    __atomic_fetch_add((uint64_t *)&qkshim_lockorder_session, 1, __ATOMIC_RELAXED);
}

/* Which objects may have a node in the graph: one bit per hash of the object's address, set
 * (under the graph's lock) when a node is made, cleared when the graph is made or dropped. An
 * object whose bit is clear has no node, so destroying it does not take the graph's lock; a set
 * bit (or a collision) only means "look". */
#define QKSHIM_LOCKORDER_NODE_BITS 18
extern _Atomic uint64_t qkshim_lockorder_nodes[(1u << QKSHIM_LOCKORDER_NODE_BITS) / 64];
static inline uint32_t qkshim_lockorder_node_hash(uintptr_t address) {
    return (uint32_t)(((uint64_t)(address >> 4) * 0x9E3779B97F4A7C15ull) >>
                      (64 - QKSHIM_LOCKORDER_NODE_BITS));
}
static inline void qkshim_lockorder_node_mark(uintptr_t address) {
    uint32_t bit = qkshim_lockorder_node_hash(address);
    __atomic_fetch_or((uint64_t *)&qkshim_lockorder_nodes[bit / 64], 1ull << (bit % 64),
                      __ATOMIC_RELEASE);
}
static inline bool qkshim_lockorder_node_maybe(uintptr_t address) {
    uint32_t bit = qkshim_lockorder_node_hash(address);
    return (__atomic_load_n((uint64_t *)&qkshim_lockorder_nodes[bit / 64], __ATOMIC_ACQUIRE) >>
            (bit % 64)) &
           1;
}
void qkshim_lockorder_nodes_clear(void);

/* The calling thread's witness state (LockOrderThread.swift), NULL until it is made. */
extern __thread void *qkshim_tls_lockorder __attribute__((tls_model("initial-exec")));
static inline void *qkshim_lockorder_thread_get(void) {
    return qkshim_tls_lockorder;
}
/* Installs `state` as the calling thread's; `on_exit(state)` runs when the thread exits (a
 * pthread key destructor). `on_exit` must be the same function on every call. */
void qkshim_lockorder_thread_install(void *state, void (*on_exit)(void *state));

/* The mode QUEUEKIT_LOCK_ORDER asked for when the library was loaded (-1: not set or not one of
 * off, report, abort; the latter was reported on stderr). */
int qkshim_lockorder_env_mode(void);

/* Parses a QUEUEKIT_LOCK_ORDER value: 0, 1, 2, or -1 when it is none of off, report, abort. */
int qkshim_lockorder_parse(const char *text);

/* The return address of the first frame of the calling thread's stack that lies outside
 * QueueKit (outside this library's object, and outside functions whose symbol names QueueKit's
 * Swift module or its C face); 0 when none is found. Slow (it
 * unwinds the stack): for an edge's first sighting only. */
uintptr_t qkshim_lockorder_call_site(void);

/* Writes "symbol+0xoff (object)" for `address` into `buffer` (strlcpy semantics), or
 * "0x... (object)" when dladdr finds the object but no symbol, or "0x..." when it finds
 * neither. Returns the full length. */
size_t qkshim_lockorder_describe_address(uintptr_t address, char *buffer, size_t size);

/* abort(), after a report in abort mode. */
__attribute__((noreturn)) void qkshim_lockorder_abort(void);

#endif
