/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * The timed loops of queuekit-bench, in C: QueueKit is called through the installed <queuekit.h>
 * and libqueuekit.so.0 exactly as a C program calls it (through the dynamic linker), and the
 * anchors (pthreads, raw libdispatch) run in the same process, built by the same compiler with
 * the same flags. The Swift driver (Sources/queuekit-bench) repeats them, takes medians and
 * prints the tables.
 *
 * Every kernel returns one sample: the time per operation; for the condition-lock workloads the
 * wake-ups and futile wake-ups per operation; for the mixed workloads with synchronous writes the
 * writers' wait, from the call to the start of the write's work (negative when not measured).
 */
#ifndef QKBENCH_H
#define QKBENCH_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    double ns_per_op;
    double wakeups_per_op;    /* < 0: not measured */
    double futile_per_op;     /* < 0: not measured */
    double write_wait_p99_ns; /* < 0: not measured */
    double write_wait_max_ns; /* < 0: not measured */
} qkb_sample_t;

/** The file the dynamic linker took QueueKit's C API from (the library C users link), or NULL. */
const char *qkb_queuekit_library(void);

/** CLOCK_MONOTONIC in nanoseconds. */
uint64_t qkb_now_ns(void);

/** Runs fn(context, i) on `count` new threads released together; returns the nanoseconds from
 *  their release until the last one finished. */
typedef void (*qkb_thread_fn)(void *context, int index);
uint64_t qkb_run_threads(int count, qkb_thread_fn fn, void *context);

/** Starts and joins one thread: glibc's pthread_mutex takes a non-atomic fast path while the
 *  process has never had a second thread, which would flatter the mutex anchor. */
void qkb_become_multithreaded(void);

/* ---- Condition lock ------------------------------------------------------------------------ */

/** A condition-lock implementation seen through four calls, so one workload drives them all
 *  (QueueKit, the pthread mutex + condvar broadcast protocol, Foundation from Swift). */
typedef struct {
    void *lock;
    int (*lock_when)(void *lock, intptr_t condition);
    int (*unlock_with)(void *lock, intptr_t condition);
    /** Optional: total wake-ups and futile wake-ups so far. */
    void (*counters)(void *lock, uint64_t *wakeups, uint64_t *futile);
} qkb_condlock_ops_t;

/** QueueKit's qk_condlock_t and the pthread broadcast protocol, as ops. `free_*` frees. */
qkb_condlock_ops_t qkb_qk_condlock_ops(intptr_t condition);
void qkb_qk_condlock_free(qkb_condlock_ops_t ops);
qkb_condlock_ops_t qkb_pt_condlock_ops(intptr_t condition);
void qkb_pt_condlock_free(qkb_condlock_ops_t ops);

/** Uncontended lock+unlock, direct calls (no ops indirection). */
qkb_sample_t qkb_mutex_uncontended(uint64_t iterations);
qkb_sample_t qkb_qk_lock_uncontended(uint64_t iterations);
/* The same, holding one other lock, with the lock-order witness in `mode` (QK_LOCK_ORDER_*). */
qkb_sample_t qkb_qk_lock_witnessed(int mode, uint64_t iterations);
qkb_sample_t qkb_qk_lock_when_uncontended(uint64_t iterations);
qkb_sample_t qkb_pt_lock_when_uncontended(uint64_t iterations);
/** Uncontended lock_when(0) + unlock_with(0) through ops (Foundation). */
qkb_sample_t qkb_ops_uncontended(qkb_condlock_ops_t ops, uint64_t iterations);

/** Two threads: lock_when(0)…unlock_with(1) / lock_when(1)…unlock_with(0); per round. The lock
 *  must start with condition 0. */
qkb_sample_t qkb_pingpong(qkb_condlock_ops_t ops, uint64_t rounds);
/** k threads, thread i: lock_when(i)…unlock_with((i+1) % k); per hand-off. Condition 0 first. */
qkb_sample_t qkb_chain(qkb_condlock_ops_t ops, int k, uint64_t handoffs);
/** A one-slot buffer (condition 0 empty, 1 full), `pairs` producers and `pairs` consumers; per
 *  item. Condition 0 first. */
qkb_sample_t qkb_prodcons(qkb_condlock_ops_t ops, int pairs, uint64_t items);

/* ---- Waits on a test of the condition (condition_tests.c) ---------------------------------- */

/** k threads, thread i waits until condition % k == i, then adds one: per hand-off. QueueKit
 *  with qk_condlock_lock_if + unlock_with (`use_await` false) or lock + qk_condlock_await +
 *  unlock_with (true); counts its wake-ups and futile wake-ups. */
qkb_sample_t qkb_qk_test_chain(int k, uint64_t handoffs, bool use_await);
/** The same with a pthread mutex and the `while (!mine) pthread_cond_wait` loop: one condition
 *  variable and pthread_cond_broadcast (`broadcast`), or one condition variable per thread and
 *  pthread_cond_signal of the next thread's. Counts the loop's wake-ups and futile ones. */
qkb_sample_t qkb_pt_test_chain(int k, uint64_t handoffs, bool broadcast);
/** A counting semaphore, `pairs` posting and `pairs` waiting threads; per item. QueueKit: wait
 *  is lock_if(count > 0) + unlock_with(count - 1), post lock + unlock_with(count + 1). */
qkb_sample_t qkb_qk_semaphore(int pairs, uint64_t items);
/** The same on POSIX sem_t. */
qkb_sample_t qkb_sem_semaphore(int pairs, uint64_t items);
/** The same on a pthread mutex + condition variable (signal). */
qkb_sample_t qkb_pt_semaphore(int pairs, uint64_t items);
/** The floor of a hand-off between two threads: they alternate one atomic flag, spinning; per
 *  round (two hand-offs). */
qkb_sample_t qkb_spin_pingpong(uint64_t rounds);
/* Two threads alternating a bare compare-and-swap lock that carries a value (a lock's floor). */
qkb_sample_t qkb_bare_lock_pingpong(uint64_t rounds);

/* ---- DB queue ------------------------------------------------------------------------------ */

/** Uncontended read of a tiny piece of work. */
qkb_sample_t qkb_qk_read(uint64_t iterations);
qkb_sample_t qkb_rwlock_read(uint64_t iterations);
qkb_sample_t qkb_gcd_sync_read(uint64_t iterations);
qkb_sample_t qkb_specific_read(uint64_t iterations);
/** The work alone, called through a function pointer: what a nested read costs at least. */
qkb_sample_t qkb_direct_call(uint64_t iterations);
/** Reads nested inside one outer read (per nested read, work included). */
qkb_sample_t qkb_qk_nested_read(uint64_t iterations);
qkb_sample_t qkb_rwlock_nested_read(uint64_t iterations);
qkb_sample_t qkb_specific_nested_read(uint64_t iterations);
/** Submit n asynchronous writes, then wait for them (per write). */
qkb_sample_t qkb_qk_write_async(uint64_t n);
qkb_sample_t qkb_gcd_barrier_async(uint64_t n);
/** Synchronous uncontended write. */
qkb_sample_t qkb_qk_write(uint64_t iterations);
qkb_sample_t qkb_rwlock_write(uint64_t iterations);

typedef enum {
    QKB_MIX_QK_ASYNC = 0, /* qk_dbqueue_read + qk_dbqueue_write_async, flush at the end */
    QKB_MIX_QK_SYNC = 1,  /* qk_dbqueue_read + qk_dbqueue_write */
    QKB_MIX_RWLOCK = 2,   /* pthread_rwlock rdlock / wrlock */
    QKB_MIX_GCD = 3,      /* dispatch_sync_f + dispatch_barrier_async_f, barrier_sync at the end */
    QKB_MIX_SPECIFIC = 4, /* plain dispatch: get_specific then sync_f; barrier_async_f */
    QKB_MIX_GCD_SYNC = 5  /* dispatch_sync_f + dispatch_barrier_sync_f */
} qkb_mix_impl_t;
/** `threads` threads doing `total_ops` operations in all, `write_percent` % of them writes;
 *  wall time per operation (all writes completed). With synchronous writes (QKB_MIX_QK_SYNC,
 *  QKB_MIX_RWLOCK, QKB_MIX_GCD_SYNC) also the 99th percentile and the maximum of the writers'
 *  wait, from the call to the start of the write's work. Every implementation reads the clock
 *  around its writes alike, so the times stay comparable. */
qkb_sample_t qkb_mixed(qkb_mix_impl_t impl, int threads, int write_percent, uint64_t total_ops);

/* ---- Identity ------------------------------------------------------------------------------ */

/** Inside a block of a serial queue: qk_queue_current(), qk_queue_is_current(q), and raw
 *  dispatch_get_specific(key) inside a dispatch_sync_f block. */
qkb_sample_t qkb_qk_current(uint64_t iterations);
qkb_sample_t qkb_qk_is_current(uint64_t iterations);
qkb_sample_t qkb_get_specific(uint64_t iterations);

/* ---- Deadlock detection ---------------------------------------------------------------------- */

/** `threads` threads lock and unlock one lock, `iterations` times in all (per lock+unlock): the
 *  contended hand-off, where a waiter that sleeps publishes its wait and searches for a cycle.
 *  `queuekit` selects qk_condlock_lock/unlock, otherwise a pthread mutex. */
qkb_sample_t qkb_contended_lock(bool queuekit, int threads, uint64_t iterations);
/** With `bystanders` threads waiting inside QueueKit (on a condition lock held throughout) and a
 *  ring of two queues half closed (a thread in queue A waits for queue B), the thread in B calls
 *  qk_queue_sync(A) `iterations` times: each call is refused with EDEADLK (per refusal: the
 *  publication, the cycle search over every waiting thread, the report and its handler). */
qkb_sample_t qkb_qk_detect_cycle(int bystanders, uint64_t iterations);
/** In the same setting, qk_copy_wait_report into a 64 KiB buffer (per report). */
qkb_sample_t qkb_qk_wait_report(int bystanders, uint64_t iterations);

/** qk_queue_sync of a tiny piece of work onto an idle serial queue (nobody else uses it). */
qkb_sample_t qkb_qk_sync_idle(uint64_t iterations);
/** dispatch_sync_f of the same work onto an idle serial queue. */
qkb_sample_t qkb_gcd_sync_idle(uint64_t iterations);

/* ---- Queue round trips (queue_kernels.c) ------------------------------------------------------ */

typedef enum { QKB_QUEUE_SERIAL = 0, QKB_QUEUE_CONCURRENT = 1 } qkb_queue_kind_t;
typedef enum { QKB_SYNC = 0, QKB_BARRIER_SYNC = 1, QKB_PERFORM = 2 } qkb_round_trip_t;
/** `iterations` round trips of a one-increment work function onto an idle queue of `kind` from
 *  one thread, outside any block: qk_queue_sync, qk_queue_barrier_sync or qk_queue_perform; the
 *  anchor: dispatch_sync_f or dispatch_barrier_sync_f (QKB_PERFORM: dispatch_sync_f). */
qkb_sample_t qkb_qk_queue_round_trip(qkb_queue_kind_t kind, qkb_round_trip_t call, uint64_t iterations);
qkb_sample_t qkb_gcd_queue_round_trip(qkb_queue_kind_t kind, qkb_round_trip_t call, uint64_t iterations);
/** Inside a block of a serial queue, qk_queue_perform onto that queue (inline); with `direct`,
 *  the same work called directly instead. */
qkb_sample_t qkb_qk_perform_inline(bool direct, uint64_t iterations);
/** `n` asynchronous submissions onto a serial queue, then one sync; per submission.
 *  qk_queue_async / dispatch_async_f. */
qkb_sample_t qkb_qk_queue_async(uint64_t n);
qkb_sample_t qkb_gcd_queue_async(uint64_t n);
/** `threads` threads syncing onto one serial queue, `iterations` syncs in all (per sync):
 *  qk_queue_sync (`queuekit`) or dispatch_sync_f. */
qkb_sample_t qkb_contended_queue_sync(bool queuekit, int threads, uint64_t iterations);

/* ---- Process start-up ---------------------------------------------------------------------- */

/** The median wall time of `spawns` starts (posix_spawn to waitpid) of one of three C programs,
 *  built on first use against the installed library: 0, an empty program; 1, the same with
 *  QueueKit's DT_NEEDED list; 2, a program that makes one QueueKit call. Every spawn of the one
 *  measured is taken in turn with the other two. NAN when they cannot be built or run. */
qkb_sample_t qkb_startup(int which, uint64_t spawns);

#endif /* QKBENCH_H */
