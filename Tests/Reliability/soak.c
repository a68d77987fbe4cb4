/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * soak.c — nothing lost under load: hammers the three components from many threads for a while
 * (60 s by default), checking invariants as it goes, and prints a summary with the counts.
 *
 *   soak [--seconds N] [--threads N]     exits non-zero on any violation
 *
 * DB queue: writer threads submit numbered writes (sync and async mixed); every write checks it
 *   runs alone (no other writer, no reader inside) and that it is the next of its thread
 *   (applied exactly once, in per-thread order); reader threads check that no writer is inside
 *   and that a two-field record is never half-written; after its own async write a thread's next
 *   read must already see it; at the end, applied == submitted for every thread.
 * Condition lock: producers and consumers hand items through a one-slot buffer with
 *   lock_when(EMPTY)/unlock_with(FULL) and lock_when(FULL)/unlock_with(EMPTY); each consumer
 *   checks the item is the next of its producer (every item consumed once, in order); at the
 *   end consumed == produced. A second lock used as a plain mutex (lock, trylock, lock_until)
 *   guards a non-atomic counter with an inside-count check.
 * Queues: a serial queue's blocks (sync and async) and a concurrent queue's barrier blocks check
 *   they run alone; concurrent non-barrier blocks check no barrier is inside; sync blocks hop
 *   into a DB read (the frame chain through a sync hop) and check the identity calls.
 */
#include "reliability.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

#define MAX_THREADS 64

static atomic_ullong violations;
static atomic_bool stop;

#define VIOLATION(...)                                                                             \
    do {                                                                                           \
        if (atomic_fetch_add(&violations, 1) < 10) {                                               \
            fprintf(stderr, "soak: VIOLATION: " __VA_ARGS__);                                      \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

/* ---- DB queue ------------------------------------------------------------------------------ */

static qk_dbqueue_t *db;
static atomic_int db_writers, db_readers;
static struct {
    uint64_t applied[MAX_THREADS]; /* last sequence number applied per writer thread */
    uint64_t first, second;        /* written in two steps; a reader must never see them differ */
} record;
static atomic_ullong db_reads, db_writes_sync, db_writes_async, db_reads_seen_own;

struct db_write {
    int thread;
    uint64_t sequence;
    bool async;
};

static void apply_write(void *context) {
    struct db_write *w = context;
    if (atomic_fetch_add(&db_writers, 1) != 0) VIOLATION("two writers inside the DB queue");
    if (atomic_load(&db_readers) != 0) VIOLATION("a reader inside during a write");
    if (record.applied[w->thread] + 1 != w->sequence)
        VIOLATION("write %llu of thread %d applied after %llu", (unsigned long long)w->sequence,
                  w->thread, (unsigned long long)record.applied[w->thread]);
    record.applied[w->thread] = w->sequence;
    record.first++;
    atomic_signal_fence(memory_order_seq_cst);
    record.second++;
    atomic_fetch_sub(&db_writers, 1);
    if (w->async) {
        atomic_fetch_add(&db_writes_async, 1);
        free(w);
    } else {
        atomic_fetch_add(&db_writes_sync, 1);
    }
}

struct db_read {
    int thread;
    uint64_t must_see;
};

static void check_read(void *context) {
    struct db_read *r = context;
    atomic_fetch_add(&db_readers, 1);
    if (atomic_load(&db_writers) != 0) VIOLATION("a writer inside during a read");
    if (record.first != record.second) VIOLATION("a read saw a half-done write");
    if (r->thread >= 0 && record.applied[r->thread] < r->must_see)
        VIOLATION("a read missed the thread's own earlier write");
    atomic_fetch_sub(&db_readers, 1);
    atomic_fetch_add(&db_reads, 1);
}

static uint64_t submitted[MAX_THREADS];

static void *db_writer(void *argument) {
    int thread = (int)(intptr_t)argument;
    rl_rng rng = {(uint64_t)thread * 7919};
    uint64_t sequence = 0;
    while (!atomic_load(&stop)) {
        ++sequence;
        if (rl_below(&rng, 2)) {
            struct db_write *w = malloc(sizeof *w);
            if (w == NULL) abort();
            *w = (struct db_write){thread, sequence, true};
            if (qk_dbqueue_write_async(db, w, apply_write) != 0) VIOLATION("write_async failed");
            /* a read that is not nested sees every write submitted before it began */
            struct db_read r = {thread, sequence};
            if (qk_dbqueue_read(db, &r, check_read) != 0) VIOLATION("read failed");
            atomic_fetch_add(&db_reads_seen_own, 1);
        } else {
            struct db_write w = {thread, sequence, false};
            if (qk_dbqueue_write(db, &w, apply_write) != 0) VIOLATION("write failed");
        }
    }
    submitted[thread] = sequence;
    return NULL;
}

static void *db_reader(void *argument) {
    (void)argument;
    struct db_read r = {-1, 0};
    while (!atomic_load(&stop))
        if (qk_dbqueue_read(db, &r, check_read) != 0) VIOLATION("read failed");
    return NULL;
}

/* ---- condition lock: producer/consumer and a plain mutex ------------------------------------ */

enum { EMPTY = 0, FULL = 1 };
static qk_condlock_t *slot_lock, *mutex;
static uint64_t slot_item;                  /* producer << 40 | sequence, under slot_lock */
static uint64_t consumed_last[MAX_THREADS]; /* per producer, under slot_lock */
static uint64_t produced_count[MAX_THREADS];
static atomic_ullong items_consumed, items_produced, producers_running;
static int slot_inside;

static void *producer(void *argument) {
    int id = (int)(intptr_t)argument;
    uint64_t sequence = 0;
    while (!atomic_load(&stop)) {
        int status = qk_condlock_lock_when_until(slot_lock, EMPTY, qk_now_ns() + 50000000);
        if (status == ETIMEDOUT) continue;
        if (status != 0) {
            VIOLATION("producer lock_when: %d", status);
            break;
        }
        if (++slot_inside != 1) VIOLATION("two threads inside the slot lock");
        if (qk_condlock_condition(slot_lock) != EMPTY)
            VIOLATION("lock_when(EMPTY) returned with another condition");
        slot_item = (uint64_t)id << 40 | ++sequence;
        slot_inside--;
        if (qk_condlock_unlock_with(slot_lock, FULL) != 0) VIOLATION("unlock_with failed");
        atomic_fetch_add(&items_produced, 1);
    }
    produced_count[id] = sequence;
    atomic_fetch_sub(&producers_running, 1);
    return NULL;
}

static void *consumer(void *argument) {
    (void)argument;
    while (true) {
        /* once every producer is done, one last try (a past deadline tries once): either the
         * slot is empty, or full and free (taken here), or another consumer is emptying it */
        bool last_try = atomic_load(&producers_running) == 0;
        int status =
            qk_condlock_lock_when_until(slot_lock, FULL, last_try ? 0 : qk_now_ns() + 20000000);
        if (status == ETIMEDOUT) {
            if (last_try) break;
            continue;
        }
        if (status != 0) {
            VIOLATION("consumer lock_when: %d", status);
            break;
        }
        if (++slot_inside != 1) VIOLATION("two threads inside the slot lock");
        int producer_id = (int)(slot_item >> 40);
        uint64_t sequence = slot_item & ((1ull << 40) - 1);
        if (consumed_last[producer_id] + 1 != sequence)
            VIOLATION("item %llu of producer %d consumed after %llu", (unsigned long long)sequence,
                      producer_id, (unsigned long long)consumed_last[producer_id]);
        consumed_last[producer_id] = sequence;
        slot_inside--;
        if (qk_condlock_unlock_with(slot_lock, EMPTY) != 0) VIOLATION("unlock_with failed");
        atomic_fetch_add(&items_consumed, 1);
    }
    return NULL;
}

static uint64_t mutex_counter; /* plain, under `mutex` */
static int mutex_inside;
static atomic_ullong mutex_sections, mutex_try_busy;

static void *mutex_user(void *argument) {
    int id = (int)(intptr_t)argument;
    uint64_t mine = 0;
    while (!atomic_load(&stop)) {
        int status;
        switch (mine % 3) {
        case 0:
            status = qk_condlock_lock(mutex);
            break;
        case 1:
            status = qk_condlock_trylock(mutex);
            break;
        default:
            status = qk_condlock_lock_until(mutex, qk_now_ns() + 1000000);
            break;
        }
        if (status == EBUSY || status == ETIMEDOUT) {
            atomic_fetch_add(&mutex_try_busy, 1);
            mine++;
            continue;
        }
        if (status != 0) {
            VIOLATION("mutex lock: %d", status);
            break;
        }
        if (++mutex_inside != 1) VIOLATION("two threads inside the mutex");
        mutex_counter++;
        mutex_inside--;
        if (qk_condlock_unlock(mutex) != 0) VIOLATION("mutex unlock failed");
        mine++;
        atomic_fetch_add(&mutex_sections, 1);
    }
    (void)id;
    return NULL;
}

/* ---- queues ------------------------------------------------------------------------------ */

static qk_queue_t *serial, *concurrent;
static atomic_int serial_inside, barrier_inside, shared_inside;
static uint64_t serial_counter;  /* plain, only in serial blocks */
static uint64_t barrier_counter; /* plain, only in barrier blocks */
static atomic_ullong serial_submitted, serial_done, barrier_submitted, shared_done;

static void serial_block(void *context) {
    (void)context;
    if (atomic_fetch_add(&serial_inside, 1) != 0) VIOLATION("two blocks inside a serial queue");
    if (qk_queue_check(serial, QK_ON_QUEUE_AS_BARRIER) != 0)
        VIOLATION("serial block: not exclusive");
    serial_counter++;
    atomic_fetch_sub(&serial_inside, 1);
    atomic_fetch_add(&serial_done, 1);
}

static void hop_read(void *context) {
    (void)context;
    /* inside a DB read, reached through a sync hop: both queues are on the chain */
    if (qk_queue_current() != qk_dbqueue_queue(db)) VIOLATION("current queue inside the hop read");
    if (qk_queue_check(serial, QK_ON_QUEUE) != 0) VIOLATION("serial queue not held further out");
    if (qk_queue_sync(serial, NULL, serial_block) != EDEADLK)
        VIOLATION("sync onto the held serial queue ran");
}

static void serial_block_with_hop(void *context) {
    serial_block(context);
    if (qk_dbqueue_read(db, NULL, hop_read) != 0) VIOLATION("read inside a serial block failed");
}

static void barrier_block(void *context) {
    (void)context;
    if (atomic_fetch_add(&barrier_inside, 1) != 0) VIOLATION("two barrier blocks at once");
    if (atomic_load(&shared_inside) != 0) VIOLATION("a barrier block overlapped a non-barrier one");
    barrier_counter++;
    atomic_fetch_sub(&barrier_inside, 1);
}

static void shared_block(void *context) {
    (void)context;
    atomic_fetch_add(&shared_inside, 1);
    if (atomic_load(&barrier_inside) != 0) VIOLATION("a non-barrier block overlapped a barrier");
    /* nested sync on the same concurrent queue runs inline, never behind a pending barrier */
    if (qk_queue_check(concurrent, QK_ON_QUEUE_AS_BARRIER) == 0)
        VIOLATION("non-barrier block counted as barrier");
    atomic_fetch_sub(&shared_inside, 1);
    atomic_fetch_add(&shared_done, 1);
}

static void nested_shared(void *context) {
    shared_block(context);
    if (qk_queue_sync(concurrent, NULL, shared_block) != 0)
        VIOLATION("nested sync on a concurrent queue failed");
}

static void *queue_user(void *argument) {
    int id = (int)(intptr_t)argument;
    uint64_t i = 0;
    while (!atomic_load(&stop)) {
        int status = 0;
        switch ((i++ + (uint64_t)id) % 6) {
        case 0:
            status = qk_queue_sync(serial, NULL, serial_block_with_hop);
            atomic_fetch_add(&serial_submitted, 1);
            break;
        case 1:
            status = qk_queue_async(serial, NULL, serial_block);
            atomic_fetch_add(&serial_submitted, 1);
            break;
        case 2:
            status = qk_queue_barrier_sync(concurrent, NULL, barrier_block);
            atomic_fetch_add(&barrier_submitted, 1);
            break;
        case 3:
            status = qk_queue_barrier_async(concurrent, NULL, barrier_block);
            atomic_fetch_add(&barrier_submitted, 1);
            break;
        case 4:
            status = qk_queue_sync(concurrent, NULL, nested_shared);
            break;
        default:
            status = qk_queue_perform(serial, NULL, serial_block);
            atomic_fetch_add(&serial_submitted, 1);
            break;
        }
        if (status != 0) VIOLATION("queue call failed: %d", status);
        /* bound the async backlog */
        if (i % 64 == 0)
            qk_queue_barrier_sync(concurrent, NULL, barrier_block),
                atomic_fetch_add(&barrier_submitted, 1);
    }
    return NULL;
}

static void nothing(void *context) {
    (void)context;
}

/* ---- main -------------------------------------------------------------------------------- */

int main(int argc, char **argv) {
    long seconds = 60;
    int per_role = 2;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = (long)rl_number(argv[++i], 1, 86400, "--seconds");
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            per_role = (int)rl_number(argv[++i], 1, 8, "--threads");
        else {
            fprintf(stderr, "usage: soak [--seconds N] [--threads N per role, 1..8]\n");
            return 2;
        }
    }
    db = qk_dbqueue_create("soak.db");
    slot_lock = qk_condlock_create(EMPTY);
    mutex = qk_condlock_create(0);
    serial = qk_queue_create("soak.serial", QK_QUEUE_SERIAL);
    concurrent = qk_queue_create("soak.concurrent", QK_QUEUE_CONCURRENT);
    if (!db || !slot_lock || !mutex || !serial || !concurrent) {
        perror("soak: creating the objects");
        return 1;
    }

    int writers = per_role * 2, readers = per_role, producers = per_role, consumers = per_role,
        mutex_users = per_role, queue_users = per_role * 2;
    pthread_t threads[6 * 16 + 8];
    int count = 0;
    atomic_store(&producers_running, (unsigned long long)producers);
    for (int i = 0; i < writers; i++)
        pthread_create(&threads[count++], NULL, db_writer, (void *)(intptr_t)i);
    for (int i = 0; i < readers; i++) pthread_create(&threads[count++], NULL, db_reader, NULL);
    for (int i = 0; i < producers; i++)
        pthread_create(&threads[count++], NULL, producer, (void *)(intptr_t)i);
    for (int i = 0; i < consumers; i++) pthread_create(&threads[count++], NULL, consumer, NULL);
    for (int i = 0; i < mutex_users; i++)
        pthread_create(&threads[count++], NULL, mutex_user, (void *)(intptr_t)i);
    for (int i = 0; i < queue_users; i++)
        pthread_create(&threads[count++], NULL, queue_user, (void *)(intptr_t)i);
    printf("soak: %d threads for %ld s\n", count, seconds);
    fflush(stdout);

    uint64_t end = qk_now_ns() + (uint64_t)seconds * 1000000000ull;
    while (qk_now_ns() < end && atomic_load(&violations) == 0) usleep(20000);
    atomic_store(&stop, true);
    for (int i = 0; i < count; i++) pthread_join(threads[i], NULL);

    /* drain, then compare what was submitted with what was applied */
    if (qk_dbqueue_flush(db) != 0) VIOLATION("final flush failed");
    uint64_t db_submitted = 0;
    for (int i = 0; i < writers; i++) {
        db_submitted += submitted[i];
        if (record.applied[i] != submitted[i])
            VIOLATION("writer %d: %llu writes submitted, %llu applied", i,
                      (unsigned long long)submitted[i], (unsigned long long)record.applied[i]);
    }
    uint64_t produced = 0;
    for (int i = 0; i < producers; i++) {
        produced += produced_count[i];
        if (consumed_last[i] != produced_count[i])
            VIOLATION("producer %d: %llu produced, %llu consumed", i,
                      (unsigned long long)produced_count[i], (unsigned long long)consumed_last[i]);
    }
    if (atomic_load(&items_consumed) != produced) VIOLATION("items consumed != produced");
    if (mutex_counter != atomic_load(&mutex_sections)) VIOLATION("mutex counter lost increments");
    qk_queue_barrier_sync(concurrent, NULL, nothing);
    qk_queue_sync(serial, NULL, nothing);
    if (serial_counter != atomic_load(&serial_submitted))
        VIOLATION("serial blocks lost or doubled");
    if (barrier_counter != atomic_load(&barrier_submitted))
        VIOLATION("barrier blocks lost or doubled");
    if (qk_condlock_destroy(slot_lock) != 0 || qk_condlock_destroy(mutex) != 0)
        VIOLATION("lock destroy failed");
    if (qk_dbqueue_destroy(db) != 0) VIOLATION("DB destroy failed");
    qk_queue_release(serial);
    qk_queue_release(concurrent);

    unsigned long long bad = atomic_load(&violations);
    printf("soak: DB queue: %llu writes (%llu sync, %llu async) applied exactly once in per-thread "
           "order, %llu reads (%llu saw the thread's own async write); condition lock: %llu items "
           "produced, %llu consumed exactly once, %llu mutex sections (%llu try/timed misses); "
           "queues: %llu serial blocks, %llu barrier blocks, %llu concurrent blocks; %llu "
           "violations\n",
           (unsigned long long)db_submitted, atomic_load(&db_writes_sync),
           atomic_load(&db_writes_async), atomic_load(&db_reads), atomic_load(&db_reads_seen_own),
           (unsigned long long)produced, atomic_load(&items_consumed), atomic_load(&mutex_sections),
           atomic_load(&mutex_try_busy), (unsigned long long)serial_counter,
           (unsigned long long)barrier_counter, atomic_load(&shared_done), bad);
    return bad == 0 ? 0 : 1;
}
