/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * torture.c — the deadlock torture test: random nested call trees over serial and concurrent
 * queues, DB queues and condition locks, run concurrently on several threads, each tree under a
 * watchdog. Zero hangs; every forbidden nesting returns its documented code and runs nothing;
 * every allowed one runs its work exactly once.
 *
 *   torture [--threads N] [--trees N] [--unordered N] [--seed S] [--long] [--tree S] [--print]
 *           [--deadline-ms N]
 *
 *   --threads N    worker threads (default 4)
 *   --trees N      trees per thread (default 2500: with 4 threads the 10,000 trees of a CI run;
 *                  --long multiplies by 50, the release check)
 *   --unordered N  trees per thread of the second phase, without a resource order (default 2500:
 *                  10,000 trees with 4 threads; --long: 250,000, so 1,000,000); 0 skips it
 *   --seed S       master seed (default: from the clock, printed); tree k of thread t uses the
 *                  seed rl_derive(S, t << 32 | k), printed with the tree on any failure
 *   --tree S       run the single tree of seed S alone (to reproduce a failure); --print shows it
 *   --deadline-ms  the watchdog's limit per tree (default 20000)
 *
 * What a tree is. Each node is one call on one resource: qk_queue_sync / barrier_sync / perform
 * on a serial or concurrent queue; qk_dbqueue_read / write / write_async / flush / destroy on a
 * DB queue; qk_condlock_lock / lock_when / lock_when_until / trylock / trylock_when / lock_until
 * (short deadline) / set / unlock-by-a-non-holder on a condition lock. The children of a node
 * run inside its block (inside the locked section for a lock), on whatever thread the library
 * runs the block. The generator tracks what the call chain holds (resource and mode: shared or
 * exclusive) and from that computes the documented result of each call *before* it runs:
 * sync onto a held serial queue is EDEADLK, a write inside a read is EDEADLK, flush inside a
 * block of the DB queue is EDEADLK, destroy there is EBUSY, lock by the holder is EDEADLK,
 * trylock by the holder is EBUSY, unlock by a non-holder is EPERM; read inside read or write,
 * perform on a held queue and sync on a concurrent queue held shared run inline.
 *
 * Why no tree can hang, by construction (so that zero hangs is a property of the library, not
 * of luck): the resources have a global order (their index in `resources` below). A *blocking*
 * acquisition — a call that may wait for another thread: a sync/barrier_sync/perform/read/write
 * /flush on a resource the chain does not hold, a lock/lock_when/set on a lock it does not hold —
 * is generated only for a resource ordered after every resource the chain holds. Calls on a held
 * resource are the reentrant cases under test: the library must answer them without waiting
 * (inline, or an error). Calls that cannot wait indefinitely (trylock*, lock_until with a 1 ms
 * deadline, write_async, unlock by a non-holder) may go anywhere. Then every wait is for a
 * resource higher than all the waiter holds, so a cycle of waits would need its highest holder to
 * wait for something higher still, held by someone in the cycle: impossible. Asynchronous writes
 * are leaves that block on nothing. So any hang the watchdog sees is a library bug.
 *
 * The second phase drops the order (`--unordered`): blocking calls on serial and concurrent
 * queues, condition locks and DB queues go anywhere, so threads do build rings of waits, and the
 * cross-thread deadlock detection must refuse exactly one call of each with EDEADLK (having run
 * nothing) while the others proceed. There every untimed blocking call may return EDEADLK
 * instead of its planned result, every timed one ETIMEDOUT (its deadline is short there), and
 * the rest still holds: mutual exclusion, work run exactly once or never, every async write run
 * before the flush after its tree, and no hang. The program prints how many calls were refused
 * for a cycle across threads.
 *
 * The lock-order witness (QUEUEKIT_LOCK_ORDER=report; ctest runs it so as reliability.torture.
 * lock-order): the ordered phase's untimed orders follow the resource order, so every cycle the
 * witness reports there must run through a timed edge (lock_until with a short deadline goes
 * anywhere, a reverse order on purpose); a report of untimed edges alone fails the run. The
 * unordered phase takes every order, so it must report (with 1,000 trees or more).
 *
 * Condition locks are owned by threads, not call chains. A sync hop normally runs its block on
 * the calling thread; if the library ever ran it elsewhere, a reentrant lock call there would be
 * by another thread (and would really wait), so such calls are skipped and counted as "hops".
 */
#include "torture.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

/* ---- failure and the watchdog ---------------------------------------------------------------- */

static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;

static _Noreturn void fail(const struct tree *t, const char *what, int index) {
    pthread_mutex_lock(&report_lock);
    fprintf(stderr, "torture: FAILED: %s", what);
    if (index >= 0)
        fprintf(stderr, " at %s %s", op_names[t->nodes[index].op],
                resources[t->nodes[index].res].name);
    fprintf(stderr, "\n");
    print_tree(stderr, t);
    fflush(stderr);
    _exit(1);
}

#define MAX_THREADS 64
struct slot {
    _Atomic uint64_t deadline; /* 0: idle */
    struct tree *_Atomic tree;
};
static struct slot slots[MAX_THREADS];
static int thread_count = 4;
static uint64_t deadline_ns = 20000000000ull;
static atomic_bool finished;

static void *watchdog(void *unused) {
    (void)unused;
    while (!atomic_load(&finished)) {
        uint64_t now = qk_now_ns();
        for (int i = 0; i < thread_count; i++) {
            uint64_t deadline = atomic_load(&slots[i].deadline);
            if (deadline != 0 && now > deadline) {
                pthread_mutex_lock(&report_lock);
                fprintf(stderr, "torture: HANG: thread %d has run one tree for more than %llu ms\n",
                        i, (unsigned long long)(deadline_ns / 1000000));
                print_tree(stderr, atomic_load(&slots[i].tree));
                /* Who waits for what inside QueueKit right now. */
                static char waits[1 << 16];
                qk_copy_wait_report(waits, sizeof waits);
                fprintf(stderr, "%s", waits[0] ? waits : "(no thread waits inside QueueKit)\n");
                /* Every thread's tree, then (TORTURE_HANG_STACKS=1, gdb installed) every stack. */
                for (int t = 0; t < thread_count; t++) {
                    if (t == i || atomic_load(&slots[t].deadline) == 0) continue;
                    fprintf(stderr, "thread %d's tree:\n", t);
                    print_tree(stderr, atomic_load(&slots[t].tree));
                }
                fflush(stderr);
                if (getenv("TORTURE_HANG_STACKS")) {
                    char command[128];
                    snprintf(command, sizeof command,
                             "gdb -p %d -batch -ex 'thread apply all bt' 1>&2", (int)getpid());
                    if (system(command) != 0) fprintf(stderr, "torture: gdb failed\n");
                }
                _exit(1);
            }
        }
        usleep(20000);
    }
    return NULL;
}

/* ---- running a tree -------------------------------------------------------------------------- */

struct counters {
    uint64_t trees, calls, ran, refused, maybe_failed, hops, async_writes, cycles;
};
static struct counters totals;

/* The deadlock handler: refusals are expected here; count their reports, show the first. */
static atomic_ulong reports;
static void count_report(void *context, const char *report) {
    (void)context;
    if (atomic_fetch_add(&reports, 1) == 0) printf("torture: the first cycle refused:\n%s", report);
}
static pthread_mutex_t totals_lock = PTHREAD_MUTEX_INITIALIZER;

/* The lock-order handler: count the reports, and those with no timed edge (the untimed orders of
 * the ordered phase never close a cycle); show the first of each phase. */
static atomic_ulong order_reports, untimed_order_reports;
static void count_order_report(void *context, const char *report) {
    (void)context;
    bool untimed = strstr(report, "(timed)") == NULL;
    if (untimed) atomic_fetch_add(&untimed_order_reports, 1);
    if (atomic_fetch_add(&order_reports, 1) == 0 || (untimed && !unordered_phase))
        printf("torture: lock-order report%s:\n%s", untimed ? " (untimed edges only)" : "", report);
}

/* Checks the witness's reports of the phase just run (when it is on): false on a violation. */
static bool check_order_reports(const char *phase, unsigned long long trees) {
    if (qk_lock_order_mode() == QK_LOCK_ORDER_OFF) return true;
    unsigned long long all = atomic_exchange(&order_reports, 0),
                       untimed = atomic_exchange(&untimed_order_reports, 0);
    printf("torture (%s): %llu lock-order reports, %llu of untimed edges only\n", phase, all,
           untimed);
    fflush(stdout);
    if (!unordered_phase && untimed > 0) {
        fprintf(stderr, "torture: FAILED: the witness reported a cycle of the ordered phase's "
                        "untimed orders\n");
        return false;
    }
    if (unordered_phase && all == 0 && trees >= 1000) {
        fprintf(stderr, "torture: FAILED: the witness reported nothing in %llu unordered trees\n",
                trees);
        return false;
    }
    return true;
}

struct visit {
    struct tree *tree;
    int index;
    struct counters *counters;
};

static void run_node(struct tree *t, int index, struct counters *c);

static void enter(struct tree *t, int index) {
    struct node *n = &t->nodes[index];
    struct resource *r = &resources[n->res];
    if (!n->fresh) return;
    if (n->inside == M_EXCLUSIVE) {
        int inside = atomic_fetch_add(&r->exclusive, 1) + 1;
        if (inside != 1 || atomic_load(&r->shared) != 0)
            fail(t, "mutual exclusion violated", index);
    } else {
        atomic_fetch_add(&r->shared, 1);
        if (atomic_load(&r->exclusive) != 0)
            fail(t, "a shared block overlapped an exclusive one", index);
    }
}

static void leave(struct tree *t, int index) {
    struct node *n = &t->nodes[index];
    struct resource *r = &resources[n->res];
    if (!n->fresh) return;
    atomic_fetch_sub(n->inside == M_EXCLUSIVE ? &r->exclusive : &r->shared, 1);
}

/* Inside a queue or DB block: the identity calls must agree with what the chain holds. */
static void check_identity(struct tree *t, int index) {
    struct node *n = &t->nodes[index];
    struct resource *r = &resources[n->res];
    if (r->kind == K_LOCK) return;
    if (qk_queue_current() != r->queue)
        fail(t, "qk_queue_current() is not the queue running the block", index);
    if (qk_queue_check(r->queue, QK_ON_QUEUE) != 0)
        fail(t, "qk_queue_check(QK_ON_QUEUE) failed inside", index);
    int barrier = qk_queue_check(r->queue, QK_ON_QUEUE_AS_BARRIER);
    if ((barrier == 0) != (n->inside == M_EXCLUSIVE))
        fail(t, "QK_ON_QUEUE_AS_BARRIER disagrees with the mode", index);
}

static void body(void *context) {
    struct visit *v = context;
    struct tree *t = v->tree;
    struct node *n = &t->nodes[v->index];
    if (atomic_fetch_add(&n->runs, 1) != 0) fail(t, "work ran twice", v->index);
    enter(t, v->index);
    check_identity(t, v->index);
    for (int k = 0; k < n->kid_count; k++) run_node(t, n->kids[k], v->counters);
    leave(t, v->index);
}

/* The asynchronous write: a leaf that checks what holds inside a write run by the writer. */
static void async_body(void *context) {
    struct visit *v = context;
    struct tree *t = v->tree;
    struct node *n = &t->nodes[v->index];
    struct resource *r = &resources[n->res];
    if (atomic_fetch_add(&n->runs, 1) != 0) fail(t, "async write ran twice", v->index);
    int inside = atomic_fetch_add(&r->exclusive, 1) + 1;
    if (inside != 1 || atomic_load(&r->shared) != 0) fail(t, "async write not exclusive", v->index);
    if (qk_queue_check(r->queue, QK_ON_QUEUE_AS_BARRIER) != 0)
        fail(t, "async write: not on queue as barrier", v->index);
    if (qk_dbqueue_flush(r->db) != EDEADLK)
        fail(t, "flush inside an async write: not EDEADLK", v->index);
    atomic_fetch_sub(&r->exclusive, 1);
    free(v);
}

static void nothing(void *context) {
    (void)context;
}

static void run_node(struct tree *t, int index, struct counters *c) {
    struct node *n = &t->nodes[index];
    struct resource *r = &resources[n->res];
    struct visit v = {t, index, c};
    int status = 0;
    c->calls++;
    if (r->kind == K_LOCK && n->expect != ETIMEDOUT && n->op != OP_UNLOCK_FOREIGN &&
        n->expect != 0 && !pthread_equal(t->lock_holder[n->res], pthread_self())) {
        /* a reentrant lock call, but the block runs on another thread than the holder */
        n->result = SKIPPED_HOP;
        c->hops++;
        return;
    }
    switch (n->op) {
    case OP_SYNC:
        status = qk_queue_sync(r->queue, &v, body);
        break;
    case OP_BARRIER_SYNC:
        status = qk_queue_barrier_sync(r->queue, &v, body);
        break;
    case OP_PERFORM:
        status = qk_queue_perform(r->queue, &v, body);
        break;
    case OP_READ:
        status = qk_dbqueue_read(r->db, &v, body);
        break;
    case OP_WRITE:
        status = qk_dbqueue_write(r->db, &v, body);
        break;
    case OP_WRITE_ASYNC: {
        struct visit *copy = malloc(sizeof *copy);
        if (copy == NULL) fail(t, "out of memory", index);
        *copy = v;
        status = qk_dbqueue_write_async(r->db, copy, async_body);
        if (status != 0) free(copy);
        c->async_writes++;
        break;
    }
    case OP_FLUSH:
        status = qk_dbqueue_flush(r->db);
        break;
    case OP_DESTROY:
        status = qk_dbqueue_destroy(r->db);
        break;
    case OP_SET:
        status = qk_condlock_set(r->lock, 0);
        break;
    case OP_UNLOCK_FOREIGN:
        status = (rl_derive(t->seed, (uint64_t)index) & 1) ? qk_condlock_unlock(r->lock)
                                                           : qk_condlock_unlock_with(r->lock, 1);
        break;
    case OP_WHEN_MISS:
        status = qk_condlock_lock_when_until(r->lock, 1, qk_now_ns() + 1000000);
        break;
    default: {
        switch (n->op) {
        case OP_LOCK:
            status = qk_condlock_lock(r->lock);
            break;
        case OP_LOCK_WHEN:
            status = qk_condlock_lock_when(r->lock, 0);
            break;
        case OP_LOCK_WHEN_UNTIL:
            status = qk_condlock_lock_when_until(r->lock, 0, qk_now_ns() + when_until_ns);
            break;
        case OP_TRYLOCK:
            status = qk_condlock_trylock(r->lock);
            break;
        case OP_TRYLOCK_WHEN:
            status = qk_condlock_trylock_when(r->lock, 0);
            break;
        case OP_LOCK_UNTIL_SHORT:
            status = qk_condlock_lock_until(r->lock, qk_now_ns() + 1000000);
            break;
        default:
            fail(t, "unknown op", index);
        }
        if (status == 0) {
            if (!n->has_work) fail(t, "a lock call that must fail succeeded", index);
            pthread_t saved = t->lock_holder[n->res];
            t->lock_holder[n->res] = pthread_self();
            body(&v);
            t->lock_holder[n->res] = saved;
            /* alternate the two releases; the condition stays 0 */
            int unlocked =
                (index & 1) ? qk_condlock_unlock(r->lock) : qk_condlock_unlock_with(r->lock, 0);
            if (unlocked != 0) fail(t, "unlock by the holder failed", index);
        }
        break;
    }
    }
    n->result = status;
    if (status == 0)
        c->ran++;
    else if (status == n->alternative && status == EDEADLK)
        c->cycles++;
    else if (status == n->alternative)
        c->maybe_failed++;
    else
        c->refused++;
    if (status != n->expect && status != n->alternative) fail(t, "unexpected status", index);
    if (status != 0 && atomic_load(&n->runs) != 0) fail(t, "a refused call ran its work", index);
    if (status == 0 && n->has_work && n->op != OP_WRITE_ASYNC && atomic_load(&n->runs) != 1)
        fail(t, "an allowed call did not run its work exactly once", index);
}

/* After the tree: every node's work ran exactly as often as its call and its ancestors allow. */
static void verify(struct tree *t, int index, bool parent_ran) {
    struct node *n = &t->nodes[index];
    if (n->result == SKIPPED_HOP) return;
    bool called = parent_ran;
    if (!called && n->result != NOT_RUN_YET)
        fail(t, "called although its parent did not run", index);
    bool ran = called && n->result == 0 && n->has_work;
    if (atomic_load(&n->runs) != (ran ? 1 : 0))
        fail(t, ran ? "allowed work did not run exactly once" : "refused work ran", index);
    for (int k = 0; k < n->kid_count; k++) verify(t, n->kids[k], ran);
}

static void run_tree(struct tree *t, struct counters *c) {
    for (int i = 0; i < NRES; i++) t->lock_holder[i] = (pthread_t)0;
    for (int r = 0; r < t->root_count; r++) run_node(t, t->roots[r], c);
    /* the asynchronous writes of this tree were submitted before these flushes */
    for (int i = 0; i < NRES; i++)
        if (resources[i].kind == K_DB && qk_dbqueue_flush(resources[i].db) != 0)
            fail(t, "flush outside any block failed", -1);
    for (int r = 0; r < t->root_count; r++) verify(t, t->roots[r], true);
    c->trees++;
}

/* ---- main -------------------------------------------------------------------------------- */

static long trees_per_thread = 2500;
/* Added to the thread number in the tree seeds of the unordered phase (new trees). */
static int phase_offset;

static void *worker(void *argument);

/* Runs the worker threads of one phase and waits for them. */
static void run_phase(void) {
    pthread_t threads[MAX_THREADS];
    for (int i = 0; i < thread_count; i++)
        pthread_create(&threads[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < thread_count; i++) pthread_join(threads[i], NULL);
}

static void report(const char *phase, uint64_t start) {
    double seconds = (double)(qk_now_ns() - start) / 1e9;
    printf("torture (%s): %llu trees, %llu calls: %llu succeeded (work run exactly once), %llu "
           "refused "
           "with the documented code and ran nothing, %llu refused with EDEADLK for a cycle across "
           "threads, %llu timing-dependent failures (trylock EBUSY, ETIMEDOUT), %llu async writes, "
           "%llu skipped thread hops; 0 hangs, 0 violations in %.2f s\n",
           phase, (unsigned long long)totals.trees, (unsigned long long)totals.calls,
           (unsigned long long)totals.ran, (unsigned long long)totals.refused,
           (unsigned long long)totals.cycles, (unsigned long long)totals.maybe_failed,
           (unsigned long long)totals.async_writes, (unsigned long long)totals.hops, seconds);
    fflush(stdout);
}

static void *worker(void *argument) {
    int id = (int)(intptr_t)argument;
    struct tree *t = malloc(sizeof *t);
    if (t == NULL) abort();
    struct counters c = {0};
    for (long k = 0; k < trees_per_thread; k++) {
        generate(t, rl_derive(master_seed, (uint64_t)(id + phase_offset) << 32 | (uint64_t)k));
        atomic_store(&slots[id].tree, t);
        atomic_store(&slots[id].deadline, qk_now_ns() + deadline_ns);
        run_tree(t, &c);
        atomic_store(&slots[id].deadline, 0);
    }
    pthread_mutex_lock(&totals_lock);
    totals.trees += c.trees;
    totals.calls += c.calls;
    totals.ran += c.ran;
    totals.refused += c.refused;
    totals.maybe_failed += c.maybe_failed;
    totals.hops += c.hops;
    totals.async_writes += c.async_writes;
    totals.cycles += c.cycles;
    pthread_mutex_unlock(&totals_lock);
    /* the watchdog may still print this tree: free it only after the run */
    atomic_store(&slots[id].tree, NULL);
    free(t);
    return NULL;
}

static void create_resources(void) {
    for (int i = 0; i < NRES; i++) {
        struct resource *r = &resources[i];
        switch (r->kind) {
        case K_LOCK:
            r->lock = qk_condlock_create(0);
            break;
        case K_SERIAL:
            r->queue = qk_queue_create(r->name, QK_QUEUE_SERIAL);
            break;
        case K_CONCURRENT:
            r->queue = qk_queue_create(r->name, QK_QUEUE_CONCURRENT);
            break;
        case K_DB:
            r->db = qk_dbqueue_create(r->name);
            r->queue = r->db ? qk_dbqueue_queue(r->db) : NULL;
            break;
        }
        if (r->kind == K_LOCK ? r->lock == NULL : r->queue == NULL) {
            perror("torture: creating the resources");
            exit(1);
        }
        if (r->kind == K_LOCK) qk_condlock_set_name(r->lock, r->name);
    }
}

static int destroy_resources(void) {
    int status = 0;
    for (int i = 0; i < NRES; i++) {
        struct resource *r = &resources[i];
        switch (r->kind) {
        case K_LOCK:
            status |= qk_condlock_destroy(r->lock);
            break;
        case K_DB:
            status |= qk_dbqueue_destroy(r->db);
            break;
        default:
            /* an empty barrier drains what is left, then the last reference goes */
            status |= qk_queue_barrier_sync(r->queue, NULL, nothing);
            qk_queue_release(r->queue);
            break;
        }
    }
    return status;
}

int main(int argc, char **argv) {
    bool have_seed = false, one_tree = false, print = false, have_unordered = false;
    long unordered_trees = 2500;
    uint64_t tree_seed = 0;
    long multiplier = 1;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        bool has_value = i + 1 < argc;
        if (strcmp(arg, "--threads") == 0 && has_value)
            thread_count = (int)rl_number(argv[++i], 1, MAX_THREADS, "--threads");
        else if (strcmp(arg, "--trees") == 0 && has_value)
            trees_per_thread = (long)rl_number(argv[++i], 1, 100000000, "--trees");
        else if (strcmp(arg, "--unordered") == 0 && has_value) {
            unordered_trees = (long)rl_number(argv[++i], 0, 100000000, "--unordered");
            have_unordered = true;
        } else if (strcmp(arg, "--seed") == 0 && has_value) {
            master_seed = rl_seed(argv[++i]);
            have_seed = true;
        } else if (strcmp(arg, "--tree") == 0 && has_value) {
            tree_seed = rl_seed(argv[++i]);
            one_tree = true;
        } else if (strcmp(arg, "--deadline-ms") == 0 && has_value)
            deadline_ns = (uint64_t)rl_number(argv[++i], 1, 3600000, "--deadline-ms") * 1000000ull;
        else if (strcmp(arg, "--long") == 0)
            multiplier = 50;
        else if (strcmp(arg, "--print") == 0)
            print = true;
        else {
            fprintf(stderr, "usage: torture [--threads N] [--trees N] [--unordered N] [--seed S] "
                            "[--long] [--tree S [--print]] [--deadline-ms N]\n");
            return 2;
        }
    }
    if (!have_seed) master_seed = qk_now_ns() ^ ((uint64_t)getpid() << 32);
    trees_per_thread *= multiplier;
    if (!have_unordered && multiplier > 1) unordered_trees = 250000;
    /* Under valgrind (memcheck serialises the threads, ~50x slower) the rings of the unordered
     * phase cost whole timeouts each: a smaller default keeps the memcheck run in its time. */
    const char *preload = getenv("LD_PRELOAD");
    if (!have_unordered && multiplier == 1 && preload != NULL &&
        strstr(preload, "vgpreload") != NULL)
        unordered_trees = 100;
    create_resources();
    qk_set_deadlock_handler(count_report, NULL);
    qk_set_lock_order_handler(count_order_report, NULL);

    pthread_t dog;
    pthread_create(&dog, NULL, watchdog, NULL);
    uint64_t start = qk_now_ns();
    if (one_tree) {
        /* one tree alone, on a thread of its own like the workers */
        static struct tree t;
        generate(&t, tree_seed);
        thread_count = 1;
        atomic_store(&slots[0].tree, &t);
        atomic_store(&slots[0].deadline, qk_now_ns() + deadline_ns);
        struct counters c = {0};
        run_tree(&t, &c);
        atomic_store(&slots[0].deadline, 0);
        totals = c;
        if (print) print_tree(stdout, &t);
    } else {
        printf("torture: master seed 0x%016llx, %d threads x %ld trees\n",
               (unsigned long long)master_seed, thread_count, trees_per_thread);
        fflush(stdout);
        run_phase();
        report("ordered", start);
        if (!check_order_reports("ordered", (unsigned long long)totals.trees)) return 1;
        if (unordered_trees > 0) {
            /* The second phase: new seeds (the thread numbers continue), no resource order. */
            unordered_phase = true;
            when_until_ns = 2000000ull;
            trees_per_thread = unordered_trees;
            phase_offset = MAX_THREADS;
            memset(&totals, 0, sizeof totals);
            printf("torture: unordered phase, %d threads x %ld trees\n", thread_count,
                   trees_per_thread);
            fflush(stdout);
            start = qk_now_ns();
            run_phase();
            report("unordered", start);
            if (!check_order_reports("unordered", (unsigned long long)totals.trees)) return 1;
            if (totals.cycles == 0 && totals.trees >= 1000) {
                fprintf(
                    stderr,
                    "torture: FAILED: no call was refused for a cycle in %llu unordered trees\n",
                    (unsigned long long)totals.trees);
                return 1;
            }
        }
    }
    atomic_store(&finished, true);
    pthread_join(dog, NULL);
    if (one_tree) report("single tree", start);

    if (destroy_resources() != 0) {
        fprintf(stderr, "torture: destroying the resources failed\n");
        return 1;
    }
    return 0;
}
