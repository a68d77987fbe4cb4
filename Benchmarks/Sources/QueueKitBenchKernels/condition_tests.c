/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/* Kernels of the waits on a test of the condition: test chains against pthread_cond_wait loops,
 * counting semaphores, and the spinning floor of a two-thread hand-off. */
#include "qkbench.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <queuekit.h>

static qkb_sample_t sample(uint64_t elapsed, uint64_t ops, double wakeups, double futile) {
    qkb_sample_t s = {.ns_per_op = (double)elapsed / (double)ops,
                      .wakeups_per_op = wakeups < 0 ? -1 : wakeups / (double)ops,
                      .futile_per_op = futile < 0 ? -1 : futile / (double)ops,
                      .write_wait_p99_ns = -1,
                      .write_wait_max_ns = -1};
    return s;
}

static void must(int status, const char *what) {
    if (status != 0) {
        fprintf(stderr, "queuekit-bench: %s: %d\n", what, status);
        abort();
    }
}

/* ---- Test chains --------------------------------------------------------------------------- */

typedef struct {
    int k;
    uint64_t rounds;
    bool use_await;
    qk_condlock_t *lock;
    /* pthread */
    pthread_mutex_t mutex;
    pthread_cond_t *conds; /* one, or k */
    bool broadcast;
    long value;
    uint64_t wakeups, futile; /* under the mutex */
} test_chain_t;

typedef struct {
    int k, i;
} turn_t;

static bool is_turn(intptr_t condition, void *context) {
    const turn_t *turn = context;
    return condition % turn->k == turn->i;
}

static void qk_chain_thread(void *context, int index) {
    test_chain_t *w = context;
    turn_t turn = {.k = w->k, .i = index};
    for (uint64_t r = 0; r < w->rounds; r++) {
        if (w->use_await) {
            must(qk_condlock_lock(w->lock), "lock");
            must(qk_condlock_await(w->lock, is_turn, &turn), "await");
        } else {
            must(qk_condlock_lock_if(w->lock, is_turn, &turn), "lock_if");
        }
        must(qk_condlock_unlock_with(w->lock, qk_condlock_condition(w->lock) + 1), "unlock_with");
    }
}

qkb_sample_t qkb_qk_test_chain(int k, uint64_t handoffs, bool use_await) {
    test_chain_t w = {.k = k, .rounds = handoffs / (uint64_t)k, .use_await = use_await};
    w.lock = qk_condlock_create(0);
    uint64_t elapsed = qkb_run_threads(k, qk_chain_thread, &w);
    qk_condlock_stats_t stats = {.size = sizeof stats};
    must(qk_condlock_get_stats(w.lock, &stats), "get_stats");
    if (qk_condlock_condition(w.lock) != (intptr_t)(w.rounds * (uint64_t)k)) abort();
    must(qk_condlock_destroy(w.lock), "destroy");
    return sample(elapsed, w.rounds * (uint64_t)k, (double)stats.wakeups,
                  (double)stats.futile_wakeups);
}

static void pt_chain_thread(void *context, int index) {
    test_chain_t *w = context;
    pthread_cond_t *mine = w->broadcast ? &w->conds[0] : &w->conds[index];
    pthread_cond_t *next = w->broadcast ? &w->conds[0] : &w->conds[(index + 1) % w->k];
    for (uint64_t r = 0; r < w->rounds; r++) {
        pthread_mutex_lock(&w->mutex);
        while (w->value % w->k != index) {
            pthread_cond_wait(mine, &w->mutex);
            w->wakeups++;
            if (w->value % w->k != index) w->futile++;
        }
        w->value++;
        if (w->broadcast)
            pthread_cond_broadcast(next);
        else
            pthread_cond_signal(next);
        pthread_mutex_unlock(&w->mutex);
    }
}

qkb_sample_t qkb_pt_test_chain(int k, uint64_t handoffs, bool broadcast) {
    test_chain_t w = {.k = k, .rounds = handoffs / (uint64_t)k, .broadcast = broadcast};
    int count = broadcast ? 1 : k;
    w.conds = calloc((size_t)count, sizeof *w.conds);
    pthread_mutex_init(&w.mutex, NULL);
    for (int c = 0; c < count; c++) pthread_cond_init(&w.conds[c], NULL);
    uint64_t elapsed = qkb_run_threads(k, pt_chain_thread, &w);
    for (int c = 0; c < count; c++) pthread_cond_destroy(&w.conds[c]);
    pthread_mutex_destroy(&w.mutex);
    free(w.conds);
    return sample(elapsed, w.rounds * (uint64_t)k, (double)w.wakeups, (double)w.futile);
}

/* ---- Counting semaphores ------------------------------------------------------------------- */

typedef struct {
    int pairs;
    uint64_t per_thread;
    qk_condlock_t *lock;
    sem_t sem;
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    long count;
    int kind; /* 0 QueueKit, 1 sem_t, 2 pthread */
} semaphore_t;

static bool positive(intptr_t count, void *context) {
    (void)context;
    return count > 0;
}

static void semaphore_thread(void *context, int index) {
    semaphore_t *s = context;
    bool poster = index % 2 == 0;
    for (uint64_t r = 0; r < s->per_thread; r++) {
        switch (s->kind) {
        case 0:
            if (poster) {
                must(qk_condlock_lock(s->lock), "lock");
            } else {
                must(qk_condlock_lock_if(s->lock, positive, NULL), "lock_if");
            }
            must(qk_condlock_unlock_with(s->lock,
                                         qk_condlock_condition(s->lock) + (poster ? 1 : -1)),
                 "unlock_with");
            break;
        case 1:
            if (poster)
                sem_post(&s->sem);
            else
                while (sem_wait(&s->sem) != 0) {}
            break;
        default:
            pthread_mutex_lock(&s->mutex);
            if (poster) {
                s->count++;
                pthread_cond_signal(&s->cond);
            } else {
                while (s->count == 0) pthread_cond_wait(&s->cond, &s->mutex);
                s->count--;
            }
            pthread_mutex_unlock(&s->mutex);
        }
    }
}

static qkb_sample_t run_semaphore(int kind, int pairs, uint64_t items) {
    semaphore_t s = {.pairs = pairs, .per_thread = items / (uint64_t)pairs, .kind = kind};
    s.lock = qk_condlock_create(0);
    sem_init(&s.sem, 0, 0);
    pthread_mutex_init(&s.mutex, NULL);
    pthread_cond_init(&s.cond, NULL);
    uint64_t elapsed = qkb_run_threads(2 * pairs, semaphore_thread, &s);
    double wakeups = -1, futile = -1;
    if (kind == 0) {
        qk_condlock_stats_t stats = {.size = sizeof stats};
        must(qk_condlock_get_stats(s.lock, &stats), "get_stats");
        wakeups = (double)stats.wakeups;
        futile = (double)stats.futile_wakeups;
        if (qk_condlock_condition(s.lock) != 0) abort();
    }
    must(qk_condlock_destroy(s.lock), "destroy");
    sem_destroy(&s.sem);
    pthread_cond_destroy(&s.cond);
    pthread_mutex_destroy(&s.mutex);
    return sample(elapsed, s.per_thread * (uint64_t)pairs, wakeups, futile);
}

qkb_sample_t qkb_qk_semaphore(int pairs, uint64_t items) {
    return run_semaphore(0, pairs, items);
}
qkb_sample_t qkb_sem_semaphore(int pairs, uint64_t items) {
    return run_semaphore(1, pairs, items);
}
qkb_sample_t qkb_pt_semaphore(int pairs, uint64_t items) {
    return run_semaphore(2, pairs, items);
}

/* ---- The floor ----------------------------------------------------------------------------- */

/* A spinning thread's hint to the CPU between two looks at a word. */
static inline void cpu_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

typedef struct {
    _Atomic int flag;
    uint64_t rounds;
} spin_t;

static void spin_thread(void *context, int index) {
    spin_t *s = context;
    for (uint64_t r = 0; r < s->rounds; r++) {
        while (atomic_load_explicit(&s->flag, memory_order_acquire) != index) {
            cpu_pause();
        }
        atomic_store_explicit(&s->flag, 1 - index, memory_order_release);
    }
}

qkb_sample_t qkb_spin_pingpong(uint64_t rounds) {
    spin_t s = {.flag = 0, .rounds = rounds};
    uint64_t elapsed = qkb_run_threads(2, spin_thread, &s);
    return sample(elapsed, rounds, -1, -1);
}

/* The floor of a lock: the same alternation through the least a lock with a condition can do. A
 * thread takes a free lock whose value is its own with one compare-and-swap, sets the other's
 * value and frees it with a store; a waiter spins on the word and the value. (On the development
 * machine it runs at the flag's speed: the compare-and-swap adds no transfer of the line.) */
typedef struct {
    _Atomic int held;
    _Atomic int value;
    uint64_t rounds;
} bare_lock_t;

static void bare_lock_thread(void *context, int index) {
    bare_lock_t *l = context;
    for (uint64_t r = 0; r < l->rounds; r++) {
        for (;;) {
            if (atomic_load_explicit(&l->held, memory_order_relaxed) == 0 &&
                atomic_load_explicit(&l->value, memory_order_relaxed) == index) {
                int expected = 0;
                if (atomic_compare_exchange_weak_explicit(
                        &l->held, &expected, 1, memory_order_acquire, memory_order_relaxed)) {
                    if (atomic_load_explicit(&l->value, memory_order_relaxed) == index) break;
                    atomic_store_explicit(&l->held, 0, memory_order_release);
                }
            }
            cpu_pause();
        }
        atomic_store_explicit(&l->value, 1 - index, memory_order_relaxed);
        atomic_store_explicit(&l->held, 0, memory_order_release);
    }
}

qkb_sample_t qkb_bare_lock_pingpong(uint64_t rounds) {
    bare_lock_t l = {.held = 0, .value = 0, .rounds = rounds};
    uint64_t elapsed = qkb_run_threads(2, bare_lock_thread, &l);
    return sample(elapsed, rounds, -1, -1);
}
