/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/* The timed loops of queuekit-bench (see include/qkbench.h). */
#define _GNU_SOURCE
#include "qkbench.h"

#include <dispatch/dispatch.h>
#include <dlfcn.h>
#include <pthread.h>
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <queuekit.h>

#define NOT_MEASURED (-1.0)

uint64_t qkb_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static qkb_sample_t sample(uint64_t elapsed, uint64_t ops) {
    qkb_sample_t s = {(double)elapsed / (double)ops, NOT_MEASURED, NOT_MEASURED, NOT_MEASURED,
                      NOT_MEASURED};
    return s;
}

const char *qkb_queuekit_library(void) {
    Dl_info info;
    return dladdr((void *)qk_version, &info) != 0 ? info.dli_fname : NULL;
}

static void check(int status, const char *what) {
    if (status != 0) {
        fprintf(stderr, "queuekit-bench: %s failed: %d\n", what, status);
        abort();
    }
}

/* ---- Threads released together ------------------------------------------------------------- */

typedef struct {
    pthread_barrier_t *start;
    qkb_thread_fn fn;
    void *context;
    int index;
    uint64_t began, ended; /* the thread's own clock readings around its work */
} thread_start_t;

static void *thread_main(void *arg) {
    thread_start_t *start = arg;
    pthread_barrier_wait(start->start);
    start->began = qkb_now_ns();
    start->fn(start->context, start->index);
    start->ended = qkb_now_ns();
    return NULL;
}

uint64_t qkb_run_threads(int count, qkb_thread_fn fn, void *context) {
    pthread_t *threads = calloc((size_t)count, sizeof *threads);
    thread_start_t *starts = calloc((size_t)count, sizeof *starts);
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, (unsigned)count + 1);
    for (int i = 0; i < count; i++) {
        starts[i] = (thread_start_t){&barrier, fn, context, i};
        check(pthread_create(&threads[i], NULL, thread_main, &starts[i]), "pthread_create");
    }
    pthread_barrier_wait(&barrier);
    /* The span of the work is read by the workers themselves, from the first one's start to the
     * last one's end: on 2 CPUs the releasing thread may run only after the workers are done
     * (which once measured two threads spinning on a flag at 0.01 ns a round). */
    uint64_t began = UINT64_MAX, ended = 0;
    for (int i = 0; i < count; i++) {
        pthread_join(threads[i], NULL);
        if (starts[i].began < began) began = starts[i].began;
        if (starts[i].ended > ended) ended = starts[i].ended;
    }
    uint64_t elapsed = ended - began;
    pthread_barrier_destroy(&barrier);
    free(starts);
    free(threads);
    return elapsed;
}

static void do_nothing(void *context, int index) {
    (void)context;
    (void)index;
}

void qkb_become_multithreaded(void) {
    qkb_run_threads(1, do_nothing, NULL);
}

/* ---- Condition lock: QueueKit as ops ------------------------------------------------------- */

static int qk_ops_lock_when(void *lock, intptr_t c) {
    return qk_condlock_lock_when(lock, c);
}
static int qk_ops_unlock_with(void *lock, intptr_t c) {
    return qk_condlock_unlock_with(lock, c);
}
static void qk_ops_counters(void *lock, uint64_t *wakeups, uint64_t *futile) {
    qk_condlock_stats_t stats = {.size = sizeof stats};
    check(qk_condlock_get_stats(lock, &stats), "qk_condlock_get_stats");
    *wakeups = stats.wakeups;
    *futile = stats.futile_wakeups;
}

qkb_condlock_ops_t qkb_qk_condlock_ops(intptr_t condition) {
    qkb_condlock_ops_t ops = {qk_condlock_create(condition), qk_ops_lock_when, qk_ops_unlock_with,
                              qk_ops_counters};
    if (!ops.lock) abort();
    return ops;
}

void qkb_qk_condlock_free(qkb_condlock_ops_t ops) {
    check(qk_condlock_destroy(ops.lock), "qk_condlock_destroy");
}

/* ---- Condition lock: the NSConditionLock protocol on a pthread mutex + condvar -------------- */

/* As swift-corelibs-foundation does it: the mutex is held only inside each call, a `held` flag
 * stands for the lock, and every unlock broadcasts. The wait loop counts wake-ups, and the ones
 * after which the thread must wait again. */
typedef struct {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    intptr_t value;
    int held;
    uint64_t wakeups, futile; /* under mutex */
} pt_condlock_t;

static int pt_lock_when(void *opaque, intptr_t c) {
    pt_condlock_t *l = opaque;
    pthread_mutex_lock(&l->mutex);
    while (l->held || l->value != c) {
        pthread_cond_wait(&l->cond, &l->mutex);
        l->wakeups++;
        if (l->held || l->value != c) l->futile++;
    }
    l->held = 1;
    pthread_mutex_unlock(&l->mutex);
    return 0;
}

static int pt_unlock_with(void *opaque, intptr_t c) {
    pt_condlock_t *l = opaque;
    pthread_mutex_lock(&l->mutex);
    l->held = 0;
    l->value = c;
    pthread_cond_broadcast(&l->cond);
    pthread_mutex_unlock(&l->mutex);
    return 0;
}

static void pt_counters(void *opaque, uint64_t *wakeups, uint64_t *futile) {
    pt_condlock_t *l = opaque;
    pthread_mutex_lock(&l->mutex);
    *wakeups = l->wakeups;
    *futile = l->futile;
    pthread_mutex_unlock(&l->mutex);
}

qkb_condlock_ops_t qkb_pt_condlock_ops(intptr_t condition) {
    pt_condlock_t *l = calloc(1, sizeof *l);
    pthread_mutex_init(&l->mutex, NULL);
    pthread_cond_init(&l->cond, NULL);
    l->value = condition;
    qkb_condlock_ops_t ops = {l, pt_lock_when, pt_unlock_with, pt_counters};
    return ops;
}

void qkb_pt_condlock_free(qkb_condlock_ops_t ops) {
    pt_condlock_t *l = ops.lock;
    pthread_cond_destroy(&l->cond);
    pthread_mutex_destroy(&l->mutex);
    free(l);
}

/* ---- Condition lock: uncontended ------------------------------------------------------------ */

qkb_sample_t qkb_mutex_uncontended(uint64_t iterations) {
    pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
    uint64_t begin = qkb_now_ns();
    for (uint64_t i = 0; i < iterations; i++) {
        pthread_mutex_lock(&mutex);
        pthread_mutex_unlock(&mutex);
    }
    return sample(qkb_now_ns() - begin, iterations);
}

qkb_sample_t qkb_qk_lock_uncontended(uint64_t iterations) {
    qk_condlock_t *lock = qk_condlock_create(0);
    uint64_t begin = qkb_now_ns();
    for (uint64_t i = 0; i < iterations; i++) {
        qk_condlock_lock(lock);
        qk_condlock_unlock(lock);
    }
    uint64_t elapsed = qkb_now_ns() - begin;
    qk_condlock_destroy(lock);
    return sample(elapsed, iterations);
}

qkb_sample_t qkb_qk_lock_witnessed(int mode, uint64_t iterations) {
    qk_condlock_t *lock = qk_condlock_create(0), *other = qk_condlock_create(0);
    check(qk_set_lock_order_mode(mode), "qk_set_lock_order_mode");
    check(qk_condlock_lock(other), "qk_condlock_lock");
    /* The first sighting of the edge other -> lock goes to the graph; the loop measures the rest. */
    check(qk_condlock_lock(lock), "qk_condlock_lock");
    check(qk_condlock_unlock(lock), "qk_condlock_unlock");
    uint64_t begin = qkb_now_ns();
    for (uint64_t i = 0; i < iterations; i++) {
        qk_condlock_lock(lock);
        qk_condlock_unlock(lock);
    }
    uint64_t elapsed = qkb_now_ns() - begin;
    check(qk_condlock_unlock(other), "qk_condlock_unlock");
    check(qk_set_lock_order_mode(QK_LOCK_ORDER_OFF), "qk_set_lock_order_mode");
    qk_condlock_destroy(lock);
    qk_condlock_destroy(other);
    return sample(elapsed, iterations);
}

qkb_sample_t qkb_qk_lock_when_uncontended(uint64_t iterations) {
    qk_condlock_t *lock = qk_condlock_create(0);
    uint64_t begin = qkb_now_ns();
    for (uint64_t i = 0; i < iterations; i++) {
        qk_condlock_lock_when(lock, 0);
        qk_condlock_unlock_with(lock, 0);
    }
    uint64_t elapsed = qkb_now_ns() - begin;
    qk_condlock_destroy(lock);
    return sample(elapsed, iterations);
}

qkb_sample_t qkb_pt_lock_when_uncontended(uint64_t iterations) {
    qkb_condlock_ops_t ops = qkb_pt_condlock_ops(0);
    uint64_t begin = qkb_now_ns();
    for (uint64_t i = 0; i < iterations; i++) {
        pt_lock_when(ops.lock, 0);
        pt_unlock_with(ops.lock, 0);
    }
    uint64_t elapsed = qkb_now_ns() - begin;
    qkb_pt_condlock_free(ops);
    return sample(elapsed, iterations);
}

qkb_sample_t qkb_ops_uncontended(qkb_condlock_ops_t ops, uint64_t iterations) {
    uint64_t begin = qkb_now_ns();
    for (uint64_t i = 0; i < iterations; i++) {
        ops.lock_when(ops.lock, 0);
        ops.unlock_with(ops.lock, 0);
    }
    return sample(qkb_now_ns() - begin, iterations);
}

/* ---- Condition lock: contended workloads, one driver for every implementation -------------- */

typedef struct {
    qkb_condlock_ops_t ops;
    int k;
    uint64_t rounds;
    volatile intptr_t slot;
    volatile intptr_t consumed;
} cl_workload_t;

static qkb_sample_t cl_sample(const cl_workload_t *w, uint64_t elapsed, uint64_t ops,
                              uint64_t wakeups0, uint64_t futile0) {
    qkb_sample_t s = sample(elapsed, ops);
    if (w->ops.counters) {
        uint64_t wakeups, futile;
        w->ops.counters(w->ops.lock, &wakeups, &futile);
        s.wakeups_per_op = (double)(wakeups - wakeups0) / (double)ops;
        s.futile_per_op = (double)(futile - futile0) / (double)ops;
    }
    return s;
}

static void cl_counters(const cl_workload_t *w, uint64_t *wakeups, uint64_t *futile) {
    *wakeups = *futile = 0;
    if (w->ops.counters) w->ops.counters(w->ops.lock, wakeups, futile);
}

static void chain_thread(void *context, int index) {
    cl_workload_t *w = context;
    for (uint64_t r = 0; r < w->rounds; r++) {
        w->ops.lock_when(w->ops.lock, index);
        w->ops.unlock_with(w->ops.lock, (index + 1) % w->k);
    }
}

qkb_sample_t qkb_chain(qkb_condlock_ops_t ops, int k, uint64_t handoffs) {
    cl_workload_t w = {.ops = ops, .k = k, .rounds = handoffs / (uint64_t)k};
    if (w.rounds == 0) w.rounds = 1;
    uint64_t wakeups0, futile0;
    cl_counters(&w, &wakeups0, &futile0);
    uint64_t elapsed = qkb_run_threads(k, chain_thread, &w);
    return cl_sample(&w, elapsed, w.rounds * (uint64_t)k, wakeups0, futile0);
}

qkb_sample_t qkb_pingpong(qkb_condlock_ops_t ops, uint64_t rounds) {
    cl_workload_t w = {.ops = ops, .k = 2, .rounds = rounds};
    uint64_t wakeups0, futile0;
    cl_counters(&w, &wakeups0, &futile0);
    uint64_t elapsed = qkb_run_threads(2, chain_thread, &w);
    return cl_sample(&w, elapsed, rounds, wakeups0, futile0);
}

static void prodcons_thread(void *context, int index) {
    cl_workload_t *w = context;
    int producer = index % 2 == 0;
    for (uint64_t r = 0; r < w->rounds; r++) {
        if (producer) {
            w->ops.lock_when(w->ops.lock, 0);
            w->slot = (intptr_t)r + 1;
            w->ops.unlock_with(w->ops.lock, 1);
        } else {
            w->ops.lock_when(w->ops.lock, 1);
            w->consumed += w->slot != 0;
            w->slot = 0;
            w->ops.unlock_with(w->ops.lock, 0);
        }
    }
}

qkb_sample_t qkb_prodcons(qkb_condlock_ops_t ops, int pairs, uint64_t items) {
    cl_workload_t w = {.ops = ops, .k = pairs, .rounds = items / (uint64_t)pairs};
    uint64_t wakeups0, futile0;
    cl_counters(&w, &wakeups0, &futile0);
    uint64_t elapsed = qkb_run_threads(2 * pairs, prodcons_thread, &w);
    uint64_t total = w.rounds * (uint64_t)pairs;
    if ((uint64_t)w.consumed != total) {
        fprintf(stderr, "queuekit-bench: producer/consumer lost items (%ld of %lu)\n",
                (long)w.consumed, (unsigned long)total);
        abort();
    }
    return cl_sample(&w, elapsed, total, wakeups0, futile0);
}

/* ---- DB queue ------------------------------------------------------------------------------ */

/* The protected "database": a few words that reads sum and writes bump. */
typedef struct {
    uint64_t words[8];
} db_data_t;

static db_data_t db_data;
static _Thread_local uint64_t read_sink;

__attribute__((noinline)) static void read_work(void *context) {
    const db_data_t *data = context;
    uint64_t sum = 0;
    for (int i = 0; i < 8; i++) sum += data->words[i];
    read_sink += sum;
}

__attribute__((noinline)) static void write_work(void *context) {
    db_data_t *data = context;
    for (int i = 0; i < 8; i++) data->words[i]++;
}

/* Called through this pointer, so no loop can see what the work does. */
static void (*volatile read_fn)(void *) = read_work;

qkb_sample_t qkb_direct_call(uint64_t iterations) {
    void (*fn)(void *) = read_fn;
    uint64_t begin = qkb_now_ns();
    for (uint64_t i = 0; i < iterations; i++) {
        fn(&db_data);
        __asm__ volatile("" ::: "memory");
    }
    return sample(qkb_now_ns() - begin, iterations);
}

qkb_sample_t qkb_qk_read(uint64_t iterations) {
    qk_dbqueue_t *db = qk_dbqueue_create("bench.read");
    uint64_t begin = qkb_now_ns();
    for (uint64_t i = 0; i < iterations; i++) qk_dbqueue_read(db, &db_data, read_work);
    uint64_t elapsed = qkb_now_ns() - begin;
    check(qk_dbqueue_destroy(db), "qk_dbqueue_destroy");
    return sample(elapsed, iterations);
}

qkb_sample_t qkb_rwlock_read(uint64_t iterations) {
    pthread_rwlock_t rwlock = PTHREAD_RWLOCK_INITIALIZER;
    void (*fn)(void *) = read_fn;
    uint64_t begin = qkb_now_ns();
    for (uint64_t i = 0; i < iterations; i++) {
        pthread_rwlock_rdlock(&rwlock);
        fn(&db_data);
        pthread_rwlock_unlock(&rwlock);
    }
    return sample(qkb_now_ns() - begin, iterations);
}

qkb_sample_t qkb_gcd_sync_read(uint64_t iterations) {
    dispatch_queue_t queue = dispatch_queue_create("bench.gcd", DISPATCH_QUEUE_CONCURRENT);
    uint64_t begin = qkb_now_ns();
    for (uint64_t i = 0; i < iterations; i++) dispatch_sync_f(queue, &db_data, read_work);
    uint64_t elapsed = qkb_now_ns() - begin;
    dispatch_release(queue);
    return sample(elapsed, iterations);
}

/* The plain dispatch pattern: a queue-specific key tells whether the caller is already on the queue. */
static char specific_key;

static dispatch_queue_t specific_queue_create(void) {
    dispatch_queue_t queue = dispatch_queue_create("bench.specific", DISPATCH_QUEUE_CONCURRENT);
    dispatch_queue_set_specific(queue, &specific_key, &specific_key, NULL);
    return queue;
}

static inline void specific_read(dispatch_queue_t queue, void *context, void (*work)(void *)) {
    if (dispatch_get_specific(&specific_key) == &specific_key)
        work(context);
    else
        dispatch_sync_f(queue, context, work);
}

qkb_sample_t qkb_specific_read(uint64_t iterations) {
    dispatch_queue_t queue = specific_queue_create();
    uint64_t begin = qkb_now_ns();
    for (uint64_t i = 0; i < iterations; i++) specific_read(queue, &db_data, read_work);
    uint64_t elapsed = qkb_now_ns() - begin;
    dispatch_release(queue);
    return sample(elapsed, iterations);
}

typedef struct {
    qk_dbqueue_t *db;
    dispatch_queue_t queue;
    pthread_rwlock_t *rwlock;
    uint64_t iterations;
    uint64_t elapsed;
} nested_t;

static void qk_nested_outer(void *context) {
    nested_t *n = context;
    uint64_t begin = qkb_now_ns();
    for (uint64_t i = 0; i < n->iterations; i++) qk_dbqueue_read(n->db, &db_data, read_work);
    n->elapsed = qkb_now_ns() - begin;
}

qkb_sample_t qkb_qk_nested_read(uint64_t iterations) {
    nested_t n = {.db = qk_dbqueue_create("bench.nested"), .iterations = iterations};
    check(qk_dbqueue_read(n.db, &n, qk_nested_outer), "qk_dbqueue_read");
    check(qk_dbqueue_destroy(n.db), "qk_dbqueue_destroy");
    return sample(n.elapsed, iterations);
}

static void specific_nested_outer(void *context) {
    nested_t *n = context;
    uint64_t begin = qkb_now_ns();
    for (uint64_t i = 0; i < n->iterations; i++) specific_read(n->queue, &db_data, read_work);
    n->elapsed = qkb_now_ns() - begin;
}

qkb_sample_t qkb_specific_nested_read(uint64_t iterations) {
    nested_t n = {.queue = specific_queue_create(), .iterations = iterations};
    dispatch_sync_f(n.queue, &n, specific_nested_outer);
    dispatch_release(n.queue);
    return sample(n.elapsed, iterations);
}

qkb_sample_t qkb_rwlock_nested_read(uint64_t iterations) {
    pthread_rwlock_t rwlock = PTHREAD_RWLOCK_INITIALIZER;
    void (*fn)(void *) = read_fn;
    pthread_rwlock_rdlock(&rwlock);
    uint64_t begin = qkb_now_ns();
    for (uint64_t i = 0; i < iterations; i++) {
        pthread_rwlock_rdlock(&rwlock);
        fn(&db_data);
        pthread_rwlock_unlock(&rwlock);
    }
    uint64_t elapsed = qkb_now_ns() - begin;
    pthread_rwlock_unlock(&rwlock);
    return sample(elapsed, iterations);
}

qkb_sample_t qkb_qk_write_async(uint64_t n) {
    qk_dbqueue_t *db = qk_dbqueue_create("bench.write_async");
    uint64_t begin = qkb_now_ns();
    for (uint64_t i = 0; i < n; i++) qk_dbqueue_write_async(db, &db_data, write_work);
    check(qk_dbqueue_flush(db), "qk_dbqueue_flush");
    uint64_t elapsed = qkb_now_ns() - begin;
    check(qk_dbqueue_destroy(db), "qk_dbqueue_destroy");
    return sample(elapsed, n);
}

static void nothing(void *context) {
    (void)context;
}

qkb_sample_t qkb_gcd_barrier_async(uint64_t n) {
    dispatch_queue_t queue = dispatch_queue_create("bench.barrier", DISPATCH_QUEUE_CONCURRENT);
    uint64_t begin = qkb_now_ns();
    for (uint64_t i = 0; i < n; i++) dispatch_barrier_async_f(queue, &db_data, write_work);
    dispatch_barrier_sync_f(queue, NULL, nothing);
    uint64_t elapsed = qkb_now_ns() - begin;
    dispatch_release(queue);
    return sample(elapsed, n);
}

qkb_sample_t qkb_qk_write(uint64_t iterations) {
    qk_dbqueue_t *db = qk_dbqueue_create("bench.write");
    uint64_t begin = qkb_now_ns();
    for (uint64_t i = 0; i < iterations; i++) qk_dbqueue_write(db, &db_data, write_work);
    uint64_t elapsed = qkb_now_ns() - begin;
    check(qk_dbqueue_destroy(db), "qk_dbqueue_destroy");
    return sample(elapsed, iterations);
}

qkb_sample_t qkb_rwlock_write(uint64_t iterations) {
    pthread_rwlock_t rwlock = PTHREAD_RWLOCK_INITIALIZER;
    uint64_t begin = qkb_now_ns();
    for (uint64_t i = 0; i < iterations; i++) {
        pthread_rwlock_wrlock(&rwlock);
        write_work(&db_data);
        pthread_rwlock_unlock(&rwlock);
    }
    return sample(qkb_now_ns() - begin, iterations);
}

/* ---- DB queue: mixed read/write from several threads --------------------------------------- */

/* A write that notes when its work started: the writer's wait is that minus the time of the call.
 * Every implementation writes through it, the asynchronous ones too (into a per-thread scratch
 * record nobody reads), so that every row pays the same two clock reads per write. */
typedef struct {
    uint64_t started;
} timed_write_t;

static void timed_write_work(void *context) {
    timed_write_t *w = context;
    w->started = qkb_now_ns();
    write_work(&db_data);
}

typedef struct {
    qkb_mix_impl_t impl;
    int write_percent;
    uint64_t ops_per_thread;
    qk_dbqueue_t *db;
    dispatch_queue_t queue;
    pthread_rwlock_t rwlock;
    timed_write_t *scratch; /* one per thread, for the asynchronous writes */
    uint64_t **waits;       /* per thread: the synchronous writes' waits, ns */
    uint64_t *wait_counts;
} mixed_t;

static int writes_synchronously(qkb_mix_impl_t impl) {
    return impl == QKB_MIX_QK_SYNC || impl == QKB_MIX_RWLOCK || impl == QKB_MIX_GCD_SYNC;
}

static void mixed_thread(void *context, int index) {
    mixed_t *m = context;
    timed_write_t *async_write = &m->scratch[index];
    uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(index + 1);
    for (uint64_t i = 0; i < m->ops_per_thread; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17; /* xorshift64 */
        if ((int)(x % 100) >= m->write_percent) {
            switch (m->impl) {
            case QKB_MIX_QK_ASYNC:
            case QKB_MIX_QK_SYNC:
                qk_dbqueue_read(m->db, &db_data, read_work);
                break;
            case QKB_MIX_RWLOCK:
                pthread_rwlock_rdlock(&m->rwlock);
                read_work(&db_data);
                pthread_rwlock_unlock(&m->rwlock);
                break;
            case QKB_MIX_GCD:
            case QKB_MIX_GCD_SYNC:
                dispatch_sync_f(m->queue, &db_data, read_work);
                break;
            case QKB_MIX_SPECIFIC:
                specific_read(m->queue, &db_data, read_work);
                break;
            }
            continue;
        }
        timed_write_t write = {0};
        uint64_t called = qkb_now_ns();
        switch (m->impl) {
        case QKB_MIX_QK_ASYNC:
            qk_dbqueue_write_async(m->db, async_write, timed_write_work);
            break;
        case QKB_MIX_QK_SYNC:
            qk_dbqueue_write(m->db, &write, timed_write_work);
            break;
        case QKB_MIX_RWLOCK:
            pthread_rwlock_wrlock(&m->rwlock);
            timed_write_work(&write);
            pthread_rwlock_unlock(&m->rwlock);
            break;
        case QKB_MIX_GCD:
        case QKB_MIX_SPECIFIC:
            dispatch_barrier_async_f(m->queue, async_write, timed_write_work);
            break;
        case QKB_MIX_GCD_SYNC:
            dispatch_barrier_sync_f(m->queue, &write, timed_write_work);
            break;
        }
        if (writes_synchronously(m->impl))
            m->waits[index][m->wait_counts[index]++] = write.started - called;
    }
}

static int compare_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The 99th percentile (nearest rank) and the maximum of every thread's waits. */
static void wait_percentiles(const mixed_t *m, int threads, qkb_sample_t *s) {
    uint64_t total = 0;
    for (int t = 0; t < threads; t++) total += m->wait_counts[t];
    if (total == 0) return;
    uint64_t *all = malloc(total * sizeof *all);
    if (!all) abort();
    uint64_t n = 0;
    for (int t = 0; t < threads; t++)
        for (uint64_t i = 0; i < m->wait_counts[t]; i++) all[n++] = m->waits[t][i];
    qsort(all, total, sizeof *all, compare_u64);
    uint64_t rank = (total * 99 + 99) / 100; /* ceil(0.99 * total), 1-based */
    s->write_wait_p99_ns = (double)all[rank - 1];
    s->write_wait_max_ns = (double)all[total - 1];
    free(all);
}

qkb_sample_t qkb_mixed(qkb_mix_impl_t impl, int threads, int write_percent, uint64_t total_ops) {
    mixed_t m = {.impl = impl,
                 .write_percent = write_percent,
                 .ops_per_thread = total_ops / (uint64_t)threads};
    pthread_rwlock_init(&m.rwlock, NULL);
    if (impl == QKB_MIX_QK_ASYNC || impl == QKB_MIX_QK_SYNC)
        m.db = qk_dbqueue_create("bench.mixed");
    if (impl == QKB_MIX_GCD || impl == QKB_MIX_GCD_SYNC)
        m.queue = dispatch_queue_create("bench.mixed", DISPATCH_QUEUE_CONCURRENT);
    if (impl == QKB_MIX_SPECIFIC) m.queue = specific_queue_create();
    m.scratch = calloc((size_t)threads, sizeof *m.scratch);
    m.waits = calloc((size_t)threads, sizeof *m.waits);
    m.wait_counts = calloc((size_t)threads, sizeof *m.wait_counts);
    if (!m.scratch || !m.waits || !m.wait_counts) abort();
    for (int t = 0; t < threads && writes_synchronously(impl); t++)
        if (!(m.waits[t] = malloc(m.ops_per_thread * sizeof **m.waits))) abort();

    uint64_t begin = qkb_now_ns();
    qkb_run_threads(threads, mixed_thread, &m);
    if (m.db) check(qk_dbqueue_flush(m.db), "qk_dbqueue_flush");
    if (m.queue) dispatch_barrier_sync_f(m.queue, NULL, nothing);
    uint64_t elapsed = qkb_now_ns() - begin;

    if (m.db) check(qk_dbqueue_destroy(m.db), "qk_dbqueue_destroy");
    if (m.queue) dispatch_release(m.queue);
    pthread_rwlock_destroy(&m.rwlock);
    qkb_sample_t s = sample(elapsed, m.ops_per_thread * (uint64_t)threads);
    wait_percentiles(&m, threads, &s);
    for (int t = 0; t < threads; t++) free(m.waits[t]);
    free(m.waits);
    free(m.wait_counts);
    free(m.scratch);
    return s;
}

/* ---- Identity ------------------------------------------------------------------------------ */

typedef struct {
    qk_queue_t *queue;
    uint64_t iterations;
    uint64_t elapsed;
    int which;
} identity_t;

static void identity_block(void *context) {
    identity_t *id = context;
    uint64_t hits = 0;
    uint64_t begin = qkb_now_ns();
    /* The barrier keeps the compiler from hoisting the call out of the loop: dispatch_get_specific
     * is declared pure, so without it the loop would run the call once. */
    switch (id->which) {
    case 0:
        for (uint64_t i = 0; i < id->iterations; i++) {
            hits += qk_queue_current() == id->queue;
            __asm__ volatile("" ::: "memory");
        }
        break;
    case 1:
        for (uint64_t i = 0; i < id->iterations; i++) {
            hits += qk_queue_is_current(id->queue);
            __asm__ volatile("" ::: "memory");
        }
        break;
    default:
        for (uint64_t i = 0; i < id->iterations; i++) {
            hits += dispatch_get_specific(&specific_key) == &specific_key;
            __asm__ volatile("" ::: "memory");
        }
        break;
    }
    id->elapsed = qkb_now_ns() - begin;
    if (hits != id->iterations) {
        fprintf(stderr, "queuekit-bench: identity check %d failed\n", id->which);
        abort();
    }
}

static qkb_sample_t qk_identity(uint64_t iterations, int which) {
    identity_t id = {.queue = qk_queue_create("bench.identity", QK_QUEUE_SERIAL),
                     .iterations = iterations,
                     .which = which};
    check(qk_queue_sync(id.queue, &id, identity_block), "qk_queue_sync");
    qk_queue_release(id.queue);
    return sample(id.elapsed, iterations);
}

qkb_sample_t qkb_qk_current(uint64_t iterations) {
    return qk_identity(iterations, 0);
}
qkb_sample_t qkb_qk_is_current(uint64_t iterations) {
    return qk_identity(iterations, 1);
}

qkb_sample_t qkb_get_specific(uint64_t iterations) {
    dispatch_queue_t queue = dispatch_queue_create("bench.specific", NULL);
    dispatch_queue_set_specific(queue, &specific_key, &specific_key, NULL);
    identity_t id = {.iterations = iterations, .which = 2};
    dispatch_sync_f(queue, &id, identity_block);
    dispatch_release(queue);
    return sample(id.elapsed, iterations);
}

/* ---- sync onto an idle queue ------------------------------------------------------------------ */

/* Times `iterations` syncs of the tiny work onto `queue` through `sync`. */
static uint64_t time_syncs(void (*sync)(void *queue), void *queue, uint64_t iterations) {
    uint64_t begin = qkb_now_ns();
    for (uint64_t i = 0; i < iterations; i++) sync(queue);
    return qkb_now_ns() - begin;
}

static void qk_sync_once(void *queue) {
    qk_queue_sync(queue, &db_data, read_work);
}
static void gcd_sync_once(void *queue) {
    dispatch_sync_f(queue, &db_data, read_work);
}

qkb_sample_t qkb_qk_sync_idle(uint64_t iterations) {
    qk_queue_t *queue = qk_queue_create("bench.sync", QK_QUEUE_SERIAL);
    uint64_t elapsed = time_syncs(qk_sync_once, queue, iterations);
    qk_queue_release(queue);
    return sample(elapsed, iterations);
}

qkb_sample_t qkb_gcd_sync_idle(uint64_t iterations) {
    dispatch_queue_t queue = dispatch_queue_create("bench.gcd.serial", NULL);
    uint64_t elapsed = time_syncs(gcd_sync_once, queue, iterations);
    dispatch_release(queue);
    return sample(elapsed, iterations);
}

/* ---- deadlock detection ------------------------------------------------------------------------ */

typedef struct {
    bool queuekit;
    qk_condlock_t *lock;
    pthread_mutex_t mutex;
    uint64_t per_thread;
} contended_t;

static void critical_section(void) {
    for (volatile int spin = 0; spin < 100; spin++) {}
}

static void contended_thread(void *context, int index) {
    (void)index;
    contended_t *c = context;
    for (uint64_t i = 0; i < c->per_thread; i++) {
        /* A critical section of ~100 ns, so that the others queue up behind the holder. */
        if (c->queuekit) {
            qk_condlock_lock(c->lock);
            critical_section();
            qk_condlock_unlock(c->lock);
        } else {
            pthread_mutex_lock(&c->mutex);
            critical_section();
            pthread_mutex_unlock(&c->mutex);
        }
    }
}

qkb_sample_t qkb_contended_lock(bool queuekit, int threads, uint64_t iterations) {
    contended_t c = {.queuekit = queuekit, .per_thread = iterations / (uint64_t)threads};
    pthread_mutex_init(&c.mutex, NULL);
    if (queuekit) c.lock = qk_condlock_create(0);
    uint64_t elapsed = qkb_run_threads(threads, contended_thread, &c);
    if (queuekit) check(qk_condlock_destroy(c.lock), "qk_condlock_destroy");
    pthread_mutex_destroy(&c.mutex);
    return sample(elapsed, c.per_thread * (uint64_t)threads);
}

typedef struct {
    qk_condlock_t *held; /* what the bystanders wait for */
    qk_queue_t *a, *b;   /* the half-closed ring */
    atomic_int a_inside;
    int which; /* 0: refusals, 1: wait reports */
    uint64_t iterations;
    uint64_t elapsed;
    int expected_waiters;
    char *buffer;
    pthread_t ring_thread;
} ring_t;

static void *bystander(void *context) {
    ring_t *r = context;
    check(qk_condlock_lock(r->held), "bystander lock");
    check(qk_condlock_unlock(r->held), "bystander unlock");
    return NULL;
}

static void ring_nothing(void *context) {
    (void)context;
}

static void ring_a_block(void *context) {
    ring_t *r = context;
    atomic_store(&r->a_inside, 1);
    check(qk_queue_sync(r->b, NULL, ring_nothing), "the ring's thread in A: sync(B)");
}

static void *ring_a_thread(void *context) {
    ring_t *r = context;
    pthread_setname_np(pthread_self(), "bench-ring");
    check(qk_queue_sync(r->a, r, ring_a_block), "the ring's thread: sync(A)");
    return NULL;
}

static int count_lines(const char *text) {
    int lines = 0;
    for (; *text; text++) lines += *text == '\n';
    return lines;
}

static void quiet_report(void *context, const char *report) {
    (void)context;
    (void)report;
}

static void *ring_a_thread(void *context);

static void ring_b_block(void *context) {
    ring_t *r = context;
    /* B is held: the ring's other thread takes A and waits for B. */
    check(pthread_create(&r->ring_thread, NULL, ring_a_thread, r), "pthread_create");
    /* Every bystander waits, and the ring's thread waits for B from inside A (not merely on its
     * way into A: its sync onto A is published for an instant before dispatch runs it). */
    while (qk_copy_wait_report(r->buffer, 1 << 16) == 0 ||
           count_lines(r->buffer) < r->expected_waiters + 1 ||
           strstr(r->buffer, "qk_queue_sync(serial queue \"bench.ring.b\")") == NULL)
        sched_yield();
    uint64_t begin = qkb_now_ns();
    for (uint64_t i = 0; i < r->iterations; i++) {
        if (r->which == 0) {
            int status = qk_queue_sync(r->a, NULL, ring_nothing);
            if (status != EDEADLK) {
                qk_copy_wait_report(r->buffer, 1 << 16);
                fprintf(stderr,
                        "queuekit-bench: the cycle was not refused (status %d, iteration %llu); "
                        "waits:\n%s",
                        status, (unsigned long long)i, r->buffer);
                abort();
            }
        } else {
            qk_copy_wait_report(r->buffer, 1 << 16);
        }
    }
    r->elapsed = qkb_now_ns() - begin;
}

static qkb_sample_t ring(int which, int bystanders, uint64_t iterations) {
    ring_t r = {.which = which, .iterations = iterations, .expected_waiters = bystanders + 1};
    r.buffer = malloc(1 << 16);
    r.held = qk_condlock_create(0);
    r.a = qk_queue_create("bench.ring.a", QK_QUEUE_SERIAL);
    r.b = qk_queue_create("bench.ring.b", QK_QUEUE_SERIAL);
    check(qk_condlock_lock(r.held), "lock");
    pthread_t *threads = calloc((size_t)bystanders + 1, sizeof *threads);
    for (int i = 0; i < bystanders; i++)
        check(pthread_create(&threads[i], NULL, bystander, &r), "pthread_create");
    qk_set_deadlock_handler(quiet_report, NULL);
    check(qk_queue_sync(r.b, &r, ring_b_block), "sync(B)");
    threads[bystanders] = r.ring_thread;
    qk_set_deadlock_handler(NULL, NULL);
    check(qk_condlock_unlock(r.held), "unlock");
    for (int i = 0; i <= bystanders; i++) pthread_join(threads[i], NULL);
    free(threads);
    check(qk_condlock_destroy(r.held), "qk_condlock_destroy");
    qk_queue_release(r.a);
    qk_queue_release(r.b);
    free(r.buffer);
    return sample(r.elapsed, iterations);
}

qkb_sample_t qkb_qk_detect_cycle(int bystanders, uint64_t iterations) {
    return ring(0, bystanders, iterations);
}
qkb_sample_t qkb_qk_wait_report(int bystanders, uint64_t iterations) {
    return ring(1, bystanders, iterations);
}
