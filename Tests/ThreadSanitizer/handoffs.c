/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * A C program whose shared data is guarded by QueueKit alone, for ThreadSanitizer: built with
 * -fsanitize=thread against the installed (uninstrumented) libqueuekit.so, it must report no race,
 * because the library tells TSan about every hand-off it makes. Built with -DUNGUARDED_COUNTER it
 * also bumps one counter with no guard at all, and TSan must still report that race (and only
 * that one): the annotations hide nothing.
 *
 * First, every thread makes the calls that take no handle at once (the process's first calls).
 * Then each thread, round after round:
 *   - DB queue: increments a counter in qk_dbqueue_write, reads it in qk_dbqueue_read; queues
 *     qk_dbqueue_write_async work with a freshly written context and reads, after
 *     qk_dbqueue_flush and outside any block, what that work wrote;
 *   - condition lock: a counter under qk_condlock_lock, qk_condlock_trylock and
 *     qk_condlock_lock_until, and a token ring with qk_condlock_lock_when/qk_condlock_unlock_with;
 *   - serial queue: a counter in qk_queue_sync and qk_queue_async blocks; a freshly written
 *     context read by an async block; a value written inside a sync block and read after it
 *     returns;
 *   - concurrent queue: a counter written in barrier blocks and read in non-barrier blocks.
 * At the end every counter must hold exactly the number of increments made. Last, a thread exits
 * holding a condition lock after writing a value; the main thread, waiting for that lock, gets it
 * with EOWNERDEAD and reads the value (before joining the thread).
 */
#include <queuekit.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

enum { THREADS = 4, ROUNDS = 100 };

static qk_dbqueue_t *db;
static qk_condlock_t *lock;
static qk_condlock_t *ring;
static qk_queue_t *serial;
static qk_queue_t *concurrent;

static long db_counter;          /* written in writes, read in reads */
static long async_counter;       /* written by write_async work */
static long async_seen[THREADS]; /* thread i's write_async work writes [i]; thread i reads it */
static long lock_counter;        /* under the condition lock */
static long ring_counter;        /* under the token ring */
static long serial_counter;      /* in serial-queue blocks */
static long barrier_counter;     /* written by barriers, read by non-barrier blocks */
#ifdef UNGUARDED_COUNTER
static long unguarded; /* the deliberate race */
#endif

static void check(int status, const char *what) {
    if (status != 0) {
        fprintf(stderr, "%s: %s (%s)\n", what, qk_strerror(status), qk_status_name(status));
        exit(1);
    }
}

/* A context written by the submitting thread and read by the work. */
struct message {
    int thread;
    long payload;
};

static void db_increment(void *context) {
    (void)context;
    db_counter++;
}
static void db_read(void *context) {
    *(long *)context = db_counter + async_counter;
}
static void db_async(void *context) {
    struct message *message = context;
    async_counter++;
    async_seen[message->thread] = message->payload;
    free(message);
}

static void serial_increment(void *context) {
    (void)context;
    serial_counter++;
}
static void serial_consume(void *context) {
    struct message *message = context;
    serial_counter += message->payload;
    free(message);
}
static void serial_answer(void *context) {
    *(long *)context = serial_counter;
}

static void barrier_increment(void *context) {
    (void)context;
    barrier_counter++;
}
static void concurrent_read(void *context) {
    *(long *)context = barrier_counter;
}

static struct message *message_new(int thread, long payload) {
    struct message *message = malloc(sizeof *message);
    if (!message) exit(1);
    message->thread = thread;
    message->payload = payload;
    return message;
}

static void *thread_main(void *argument) {
    int me = (int)(intptr_t)argument;
    for (long round = 1; round <= ROUNDS; round++) {
        long seen = -1;

        /* DB queue */
        check(qk_dbqueue_write(db, NULL, db_increment), "qk_dbqueue_write");
        check(qk_dbqueue_read(db, &seen, db_read), "qk_dbqueue_read");
        check(qk_dbqueue_write_async(db, message_new(me, round), db_async),
              "qk_dbqueue_write_async");
        check(qk_dbqueue_flush(db), "qk_dbqueue_flush");
        if (async_seen[me] != round) {
            fprintf(stderr, "thread %d: after flush, write_async's work of round %ld not seen\n",
                    me, round);
            exit(1);
        }

        /* condition lock */
        check(qk_condlock_lock(lock), "qk_condlock_lock");
        lock_counter++;
        check(qk_condlock_unlock(lock), "qk_condlock_unlock");
        int status;
        while ((status = qk_condlock_trylock(lock)) == EBUSY) {}
        check(status, "qk_condlock_trylock");
        lock_counter++;
        check(qk_condlock_unlock(lock), "qk_condlock_unlock");
        check(qk_condlock_lock_until(lock, qk_now_ns() + 60000000000ull), "qk_condlock_lock_until");
        lock_counter++;
        check(qk_condlock_unlock(lock), "qk_condlock_unlock");

        check(qk_condlock_lock_when(ring, me), "qk_condlock_lock_when");
        ring_counter++;
        check(qk_condlock_unlock_with(ring, (me + 1) % THREADS), "qk_condlock_unlock_with");

        /* serial queue */
        check(qk_queue_sync(serial, NULL, serial_increment), "qk_queue_sync");
        check(qk_queue_async(serial, NULL, serial_increment), "qk_queue_async");
        check(qk_queue_async(serial, message_new(me, 2), serial_consume), "qk_queue_async");
        long answer = -1;
        check(qk_queue_sync(serial, &answer, serial_answer), "qk_queue_sync");
        if (answer < 4 * round) {
            fprintf(stderr, "thread %d: serial queue counter %ld after round %ld\n", me, answer,
                    round);
            exit(1);
        }

        /* concurrent queue */
        check(qk_queue_barrier_async(concurrent, NULL, barrier_increment),
              "qk_queue_barrier_async");
        check(qk_queue_sync(concurrent, &seen, concurrent_read), "qk_queue_sync");
        check(qk_queue_barrier_sync(concurrent, NULL, barrier_increment), "qk_queue_barrier_sync");

#ifdef UNGUARDED_COUNTER
        unguarded++;
#endif
    }
    return NULL;
}

/* A thread that abandons `lock` after writing `abandoned_value`, having told `ready`. */
static long abandoned_value;
static qk_condlock_t *ready;
static void *abandon_main(void *argument) {
    check(qk_condlock_lock(argument), "qk_condlock_lock");
    abandoned_value = 42;
    check(qk_condlock_set(ready, 1), "qk_condlock_set");
    return NULL; /* exits holding the lock */
}

static int expect(const char *name, long value, long expected) {
    if (value == expected) return 0;
    fprintf(stderr, "%s is %ld, expected %ld\n", name, value, expected);
    return 1;
}

/* The calls that take no handle, made first in the process on every thread at once: what they
 * make lazily inside the library (the system queues, the handlers' and the witness's state) must
 * not show as races in the program. */
static int specific_key;
static void *handleless_main(void *argument) {
    (void)argument;
    char buffer[256];
    (void)qk_version();
    (void)qk_now_ns();
    if (!qk_queue_main() || !qk_queue_global(QK_QOS_DEFAULT) || qk_queue_current()) {
        fprintf(stderr, "system queues or qk_queue_current outside a block: wrong answer\n");
        exit(1);
    }
    (void)qk_queue_copy_current_label(buffer, sizeof buffer);
    (void)qk_get_specific(&specific_key);
    (void)qk_copy_wait_report(buffer, sizeof buffer);
    check(qk_set_deadlock_handler(NULL, NULL), "qk_set_deadlock_handler");
    check(qk_set_stall_handler(0, NULL, NULL), "qk_set_stall_handler");
    check(qk_set_lock_order_mode(qk_lock_order_mode()), "qk_set_lock_order_mode");
    check(qk_set_lock_order_handler(NULL, NULL), "qk_set_lock_order_handler");
    return NULL;
}

int main(void) {
    pthread_t first[THREADS];
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&first[i], NULL, handleless_main, NULL) != 0) return 1;
    for (int i = 0; i < THREADS; i++) pthread_join(first[i], NULL);

    db = qk_dbqueue_create("tsan.db");
    lock = qk_condlock_create(0);
    ring = qk_condlock_create(0);
    serial = qk_queue_create("tsan.serial", QK_QUEUE_SERIAL);
    concurrent = qk_queue_create("tsan.concurrent", QK_QUEUE_CONCURRENT);
    if (!db || !lock || !ring || !serial || !concurrent) return 1;

    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&threads[i], NULL, thread_main, (void *)(intptr_t)i) != 0) return 1;
    for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);

    /* Every block of the queues has run once a sync after them returns. */
    long final = 0;
    check(qk_queue_sync(serial, &final, serial_answer), "qk_queue_sync");
    check(qk_queue_barrier_sync(concurrent, &final, concurrent_read), "qk_queue_barrier_sync");
    check(qk_dbqueue_flush(db), "qk_dbqueue_flush");

    int wrong = expect("db_counter", db_counter, THREADS * ROUNDS) +
                expect("async_counter", async_counter, THREADS * ROUNDS) +
                expect("lock_counter", lock_counter, 3 * THREADS * ROUNDS) +
                expect("ring_counter", ring_counter, THREADS * ROUNDS) +
                expect("serial_counter", serial_counter, 4 * THREADS * ROUNDS) +
                expect("barrier_counter", barrier_counter, 2 * THREADS * ROUNDS);
#ifdef UNGUARDED_COUNTER
    printf("unguarded counter: %ld (may be less than %d: it races)\n", unguarded, THREADS * ROUNDS);
#endif

    ready = qk_condlock_create(0);
    pthread_t abandoner;
    if (!ready || pthread_create(&abandoner, NULL, abandon_main, lock) != 0) return 1;
    check(qk_condlock_lock_when(ready, 1), "qk_condlock_lock_when");
    check(qk_condlock_unlock(ready), "qk_condlock_unlock");
    int status = qk_condlock_lock(lock); /* waits for the holder to exit */
    if (status != EOWNERDEAD) {
        fprintf(stderr, "locking an abandoned lock: %s, expected EOWNERDEAD\n",
                qk_status_name(status));
        return 1;
    }
    wrong += expect("abandoned_value", abandoned_value, 42);
    check(qk_condlock_unlock(lock), "qk_condlock_unlock");
    pthread_join(abandoner, NULL);
    check(qk_condlock_destroy(ready), "qk_condlock_destroy");

    check(qk_dbqueue_destroy(db), "qk_dbqueue_destroy");
    check(qk_condlock_destroy(lock), "qk_condlock_destroy");
    check(qk_condlock_destroy(ring), "qk_condlock_destroy");
    qk_queue_release(serial);
    qk_queue_release(concurrent);
    if (wrong) return 1;
    printf("all counters exact after %d threads x %d rounds\n", THREADS, ROUNDS);
    return 0;
}
