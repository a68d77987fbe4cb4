/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * dbqueue_manager.c — the original pattern's BLDBQueueManager, in C, on a QueueKit DB queue.
 *
 * The original pattern wraps a concurrent dispatch queue: reads go through dispatch_sync, writes through
 * dispatch_barrier_async, and a dispatch_get_specific check runs a nested read inline. It
 * promises that "no matter how the upper layers nest their calls, there is no deadlock". That is
 * false: when a read nests through ANOTHER queue (module A reads, calls module B on B's serial
 * queue with dispatch_sync, and B reads), dispatch_get_specific sees B's queue, not the DB
 * queue, so B's read is a real dispatch_sync. If a write was submitted meanwhile, its barrier is
 * pending: B's read waits behind the barrier, the barrier waits for A's read to end, and A's read
 * waits for B. Deadlock.
 *
 * QueueKit tracks what each thread holds across such hops (qk_queue_sync, qk_queue_perform,
 * other DB queues), so every nesting below completes:
 *   - a read helper called from inside a write runs inline (the writer may read its own state);
 *   - a read that calls another module through its serial queue, which reads again while a
 *     write is pending, runs inline too, and the write runs after the outer read;
 *   - a write attempted inside a read is refused with EDEADLK (an upgrade could never proceed),
 *     and the code can queue it with qk_dbqueue_write_async instead.
 *
 * Usage: dbqueue_manager [transfers-per-thread]   (default 2000; validated with strtonum)
 * Exits 0 when every invariant held, 1 otherwise.
 */
#define _POSIX_C_SOURCE 200809L

#include <queuekit.h>

#include <bsd/stdlib.h> /* arc4random_uniform, strtonum */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define ACCOUNTS        16
#define INITIAL_BALANCE 1000
#define WORKERS         4

static int failures;
static pthread_mutex_t failures_lock = PTHREAD_MUTEX_INITIALIZER;

/* Reports a failed invariant; the process exits non-zero at the end. */
static void fail(const char *what, long got, long expected) {
    pthread_mutex_lock(&failures_lock);
    failures++;
    pthread_mutex_unlock(&failures_lock);
    fprintf(stderr, "FAILED: %s: got %ld, expected %ld\n", what, got, expected);
}

/* ---------------------------------------------------------------------------------------- */
/* The DB manager: one shared instance, a DB queue and the state it protects.              */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    qk_dbqueue_t *queue;
    long balance[ACCOUNTS]; /* the "database": only touched inside the queue's blocks */
    long transfers;
} db_manager;

static db_manager manager;
static pthread_once_t manager_once = PTHREAD_ONCE_INIT;

static void manager_init(void) {
    int i;
    manager.queue = qk_dbqueue_create("bank.db");
    for (i = 0; i < ACCOUNTS; i++) manager.balance[i] = INITIAL_BALANCE;
}

/* The original pattern's +shareInstance. */
static db_manager *shared_manager(void) {
    pthread_once(&manager_once, manager_init);
    return &manager;
}

/* The original pattern's syncDBBlock: a read, inline when nested. Returns the status (0, or EINVAL). */
static int db_read(void *context, qk_function_t work) {
    return qk_dbqueue_read(shared_manager()->queue, context, work);
}

/* A synchronous write: inline when nested in a write, EDEADLK inside a read. */
static int db_write(void *context, qk_function_t work) {
    return qk_dbqueue_write(shared_manager()->queue, context, work);
}

/* The original pattern's asyncBarrierDBBlock: allowed anywhere, runs after any enclosing block. */
static int db_write_async(void *context, qk_function_t work) {
    return qk_dbqueue_write_async(shared_manager()->queue, context, work);
}

/* ---------------------------------------------------------------------------------------- */
/* Module "accounts": business calls that read and write through the manager.              */
/* ---------------------------------------------------------------------------------------- */

static void sum_balances(void *context) {
    long *total = context;
    int i;
    *total = 0;
    for (i = 0; i < ACCOUNTS; i++) *total += manager.balance[i];
}

/* A read helper: called on its own, from inside reads, and from inside writes. */
static long total_balance(void) {
    long total = -1;
    int status = db_read(&total, sum_balances);
    if (status != 0) fail("total_balance: qk_dbqueue_read status", status, 0);
    return total;
}

typedef struct {
    int from, to;
    long amount;
} transfer_request;

static void apply_transfer(void *context) {
    transfer_request *request = context;
    if (manager.balance[request->from] < request->amount) return; /* insufficient funds */
    manager.balance[request->from] -= request->amount;
    manager.balance[request->to] += request->amount;
    manager.transfers++;
    /* Nested: a read helper inside the write. With the original pattern this is the dispatch_get_specific
     * case; here it runs inline and sees the write's own changes. */
    if (total_balance() != (long)ACCOUNTS * INITIAL_BALANCE)
        fail("money conserved inside a transfer", total_balance(),
             (long)ACCOUNTS * INITIAL_BALANCE);
}

static int transfer(int from, int to, long amount) {
    transfer_request request;
    request.from = from;
    request.to = to;
    request.amount = amount;
    return db_write(&request, apply_transfer);
}

/* A queued transfer: the request is copied to the heap and freed by the work. */
static void apply_transfer_and_free(void *context) {
    apply_transfer(context);
    free(context);
}

static int transfer_async(int from, int to, long amount) {
    transfer_request *request = malloc(sizeof *request);
    int status;
    if (request == NULL) return ENOMEM;
    request->from = from;
    request->to = to;
    request->amount = amount;
    status = db_write_async(request, apply_transfer_and_free);
    if (status != 0) free(request);
    return status;
}

/* ---------------------------------------------------------------------------------------- */
/* Module "audit": has its own serial queue, and reads the DB from its blocks.             */
/* ---------------------------------------------------------------------------------------- */

static qk_queue_t *audit_queue;

typedef struct {
    long seen;
    int from_inside_a_read; /* the caller holds a read of the DB queue further out */
} audit_request;

static void audit_on_its_queue(void *context) {
    audit_request *request = context;
    /* We are on the audit queue now, not on the DB queue: dispatch_get_specific would say "not
     * nested" and the original pattern would dispatch_sync behind any pending barrier. QueueKit knows this
     * thread's call tree holds a read of the DB queue further out and runs the read inline. */
    int held = qk_queue_check(qk_dbqueue_queue(shared_manager()->queue), QK_ON_QUEUE) == 0;
    if (held != request->from_inside_a_read)
        fail("the DB queue is held further out", held, request->from_inside_a_read);
    request->seen = total_balance();
}

/* The audit module's entry point: hops onto its serial queue. */
static long audit_total(int from_inside_a_read) {
    audit_request request;
    int status;
    request.seen = -1;
    request.from_inside_a_read = from_inside_a_read;
    status = qk_queue_sync(audit_queue, &request, audit_on_its_queue);
    if (status != 0) fail("audit: qk_queue_sync status", status, 0);
    return request.seen;
}

/* ---------------------------------------------------------------------------------------- */
/* The interleaving that deadlocks the original pattern, forced step by step.                          */
/* ---------------------------------------------------------------------------------------- */

/* A one-shot event between two threads. */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int set;
} event;

static void event_init(event *e) {
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->cond, NULL);
    e->set = 0;
}
static void event_set(event *e) {
    pthread_mutex_lock(&e->lock);
    e->set = 1;
    pthread_cond_signal(&e->cond);
    pthread_mutex_unlock(&e->lock);
}
static void event_wait(event *e) {
    pthread_mutex_lock(&e->lock);
    while (!e->set) pthread_cond_wait(&e->cond, &e->lock);
    pthread_mutex_unlock(&e->lock);
}

static event reader_inside, write_submitted;
static long write_ran; /* set inside the write; read under the DB queue */
static long order_violations;

static void report_body(void *context) {
    long audited;
    (void)context;
    event_set(&reader_inside);
    event_wait(&write_submitted); /* a write is now pending behind this read */
    audited = audit_total(1); /* read -> audit queue -> read: the original pattern deadlocks here */
    if (audited != (long)ACCOUNTS * INITIAL_BALANCE)
        fail("audited total", audited, (long)ACCOUNTS * INITIAL_BALANCE);
    if (write_ran) order_violations++; /* the pending write must wait for this read */
}

static void *reporter(void *unused) {
    (void)unused;
    if (db_read(NULL, report_body) != 0) fail("report: read status", 1, 0);
    return NULL;
}

static void mark_write_ran(void *context) {
    (void)context;
    write_ran = 1;
}

static void check_write_ran(void *context) {
    long *out = context;
    *out = write_ran;
}

static void nested_read_deadlock_scenario(void) {
    pthread_t thread;
    long ran = 0;
    event_init(&reader_inside);
    event_init(&write_submitted);
    pthread_create(&thread, NULL, reporter, NULL);
    event_wait(&reader_inside);
    /* The reader is inside: this write cannot start until it leaves, so it is pending. */
    if (db_write_async(NULL, mark_write_ran) != 0) fail("write_async status", 1, 0);
    event_set(&write_submitted);
    pthread_join(thread, NULL);
    /* A read that begins now sees every write submitted before it. */
    db_read(&ran, check_write_ran);
    if (ran != 1) fail("the pending write ran after the report", ran, 1);
    if (order_violations != 0) fail("the write waited for the outer read", order_violations, 0);
    printf("nested-read scenario: nested read through the audit queue completed with a write "
           "pending\n");
}

/* ---------------------------------------------------------------------------------------- */
/* A misuse the library refuses instead of hanging: upgrading a read to a write.           */
/* ---------------------------------------------------------------------------------------- */

static void upgrade_inside_read(void *context) {
    int *status = context;
    *status = transfer(0, 1, 1); /* a write inside a read: EDEADLK, nothing done */
    if (*status == EDEADLK) {
        /* The right way from here: queue it; it runs after this read. */
        if (transfer_async(0, 1, 1) != 0) fail("transfer_async inside a read", 1, 0);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Several threads doing random business calls.                                             */
/* ---------------------------------------------------------------------------------------- */

static long transfers_per_thread = 2000;

static void *worker(void *unused) {
    long i;
    (void)unused;
    for (i = 0; i < transfers_per_thread; i++) {
        int from = (int)arc4random_uniform(ACCOUNTS);
        int to = (int)arc4random_uniform(ACCOUNTS);
        long amount = (long)arc4random_uniform(50) + 1;
        switch (arc4random_uniform(4)) {
        case 0:
            if (transfer(from, to, amount) != 0) fail("transfer status", 1, 0);
            break;
        case 1:
            if (transfer_async(from, to, amount) != 0) fail("transfer_async status", 1, 0);
            break;
        case 2:
            if (audit_total(0) != (long)ACCOUNTS * INITIAL_BALANCE)
                fail("audit from a worker", 1, 0);
            break;
        default:
            if (total_balance() != (long)ACCOUNTS * INITIAL_BALANCE)
                fail("total from a worker", 1, 0);
            break;
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    pthread_t threads[WORKERS];
    const char *error = NULL;
    int i, status = -1;

    if (argc > 1) {
        transfers_per_thread = (long)strtonum(argv[1], 1, 1000000, &error);
        if (error != NULL) {
            fprintf(stderr, "usage: %s [transfers-per-thread 1..1000000]: %s\n", argv[0], error);
            return 2;
        }
    }
    if (shared_manager()->queue == NULL) {
        fprintf(stderr, "qk_dbqueue_create: %s\n", qk_strerror(errno));
        return 1;
    }
    audit_queue = qk_queue_create("bank.audit", QK_QUEUE_SERIAL);

    nested_read_deadlock_scenario();

    db_read(&status, upgrade_inside_read);
    if (status != EDEADLK) fail("a write inside a read is refused", status, EDEADLK);
    printf("write inside a read: %s (queued with write_async instead)\n", qk_strerror(status));

    for (i = 0; i < WORKERS; i++) pthread_create(&threads[i], NULL, worker, NULL);
    for (i = 0; i < WORKERS; i++) pthread_join(threads[i], NULL);

    /* Wait for the queued transfers, then check that money was conserved. */
    if (qk_dbqueue_flush(shared_manager()->queue) != 0) fail("flush", 1, 0);
    if (total_balance() != (long)ACCOUNTS * INITIAL_BALANCE)
        fail("money conserved", total_balance(), (long)ACCOUNTS * INITIAL_BALANCE);
    printf("%d workers x %ld calls: %ld transfers applied, total %ld\n", WORKERS,
           transfers_per_thread, manager.transfers, total_balance());

    /* destroy runs whatever is still queued, then frees. */
    if (qk_dbqueue_destroy(shared_manager()->queue) != 0) fail("destroy", 1, 0);
    qk_queue_release(audit_queue);

    if (failures != 0) {
        fprintf(stderr, "%d invariant(s) failed\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
