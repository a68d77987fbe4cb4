/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * queue_sync_deadlock.c — the two classic dispatch_sync deadlocks, defused.
 *
 * With plain libdispatch both of these crash ("dispatch_sync called on queue already owned by
 * current thread") or hang forever:
 *
 *   1. on the main thread:          dispatch_sync(dispatch_get_main_queue(), block);
 *   2. inside a serial queue block: dispatch_sync(that_same_queue, block);
 *
 * The usual fix is a dispatch_get_specific guard: "if I am already on the queue, just call the
 * block". That guard is blind to the queue *further out*: inside A -> sync(B) -> sync(A), the
 * specific of A is not visible (B is the current queue), so the guard says "not on A" and the
 * sync onto A deadlocks anyway.
 *
 * QueueKit tracks what the calling thread holds, through every sync hop, so:
 *   - qk_queue_sync onto a queue the thread already holds exclusively returns EDEADLK and does
 *     NOT run the work (nothing crashes, nothing hangs);
 *   - qk_queue_perform is the guard done right: it runs the work inline whenever the thread is
 *     already on the queue (here or further out), and otherwise behaves as qk_queue_sync.
 *
 * Usage: queue_sync_deadlock [depth]
 *   depth (1..63, default 4): how many serial queues the hop chain of step 3 passes through
 *   before it comes back to the first one.
 *
 * Exits 0 when every expectation holds, 1 otherwise (2 for a bad argument).
 */
#include <queuekit.h>

#include <bsd/stdlib.h> /* strtonum: validated numeric arguments */
#include <errno.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;

/* Checks one expectation and says what it was. */
static void expect(int condition, const char *what) {
    printf("%s %s\n", condition ? "ok  " : "FAIL", what);
    if (!condition) failures++;
}

/* A piece of work that records that it ran. */
static void mark_ran(void *context) {
    *(int *)context = 1;
}

/* ---- 1. The main queue, from the main thread ------------------------------------------ */

static void main_queue_from_main_thread(void) {
    qk_queue_t *main_queue = qk_queue_main();
    int ran = 0;

    /* Outside any block, the main thread counts as running the main queue... */
    expect(qk_queue_current() == main_queue, "main thread: the current queue is the main queue");

    /* ...so a sync onto it would wait for itself. QueueKit refuses, and runs nothing. */
    int status = qk_queue_sync(main_queue, &ran, mark_ran);
    expect(status == EDEADLK, "main thread: qk_queue_sync(main) returns EDEADLK");
    expect(!ran, "main thread: ...and the work did not run");
    printf("      (qk_strerror: %s)\n", qk_strerror(status));

    /* perform is the safe spelling: already on the main queue, so the work runs right here. */
    ran = 0;
    expect(qk_queue_perform(main_queue, &ran, mark_ran) == 0,
           "main thread: qk_queue_perform(main) succeeds");
    expect(ran, "main thread: ...and ran the work inline");
}

/* ---- 2. A serial queue, from inside its own block -------------------------------------- */

struct own_block {
    qk_queue_t *queue;
    int sync_status;
    int sync_ran;
    int perform_status;
    int perform_ran;
    int perform_was_on_queue;
};

static void note_on_queue(void *context) {
    struct own_block *state = context;
    state->perform_ran = 1;
    state->perform_was_on_queue = qk_queue_current() == state->queue;
}

static void sync_onto_own_queue(void *context) {
    struct own_block *state = context;
    /* The original pattern's crash: this block runs on `queue`, and syncs onto `queue` again. */
    state->sync_status = qk_queue_sync(state->queue, &state->sync_ran, mark_ran);
    /* The safe pattern: perform runs inline, still on `queue`. */
    state->perform_status = qk_queue_perform(state->queue, state, note_on_queue);
}

static void serial_queue_from_inside(void) {
    struct own_block state;
    memset(&state, 0, sizeof state);
    state.queue = qk_queue_create("example.serial", QK_QUEUE_SERIAL);
    if (state.queue == NULL) {
        expect(0, "qk_queue_create");
        return;
    }

    /* As in the original pattern, the block is submitted asynchronously... */
    qk_queue_async(state.queue, &state, sync_onto_own_queue);
    /* ...and a sync from outside (legal: this thread is not on the queue) waits for it, because
     * a serial queue runs its blocks in order. */
    int ran_after = 0;
    expect(qk_queue_sync(state.queue, &ran_after, mark_ran) == 0 && ran_after,
           "outside: qk_queue_sync(serial) runs after the async block");

    expect(state.sync_status == EDEADLK, "serial block: qk_queue_sync(own queue) returns EDEADLK");
    expect(!state.sync_ran, "serial block: ...and the work did not run");
    expect(state.perform_status == 0 && state.perform_ran,
           "serial block: qk_queue_perform(own queue) runs the work");
    expect(state.perform_was_on_queue, "serial block: ...inline, with the queue still current");

    qk_queue_release(state.queue);
}

/* ---- 3. The hop: A -> B -> ... -> back to A -------------------------------------------- */

#define MAX_DEPTH 64

struct hop_chain {
    qk_queue_t *queues[MAX_DEPTH];
    int depth;
    int level;
    const void *key;
    int guard_saw_first; /* the dispatch_get_specific guard's view at the end of the chain */
    int check_status;    /* qk_queue_check's view (dispatch_assert_queue's) */
    int sync_status;
    int sync_ran;
    int perform_status;
    int perform_ran;
};

static void hop(void *context) {
    struct hop_chain *chain = context;
    if (++chain->level < chain->depth) {
        /* Go one queue deeper, synchronously: the blocks further out wait, holding their queues. */
        qk_queue_sync(chain->queues[chain->level], chain, hop);
        return;
    }
    /* The innermost block. The original pattern's guard looks for the first queue's specific: it is not
     * visible here, so the guard would conclude "not on the first queue" and dispatch_sync. */
    chain->guard_saw_first = qk_get_specific(chain->key) == chain->queues[0];
    /* QueueKit knows the first queue is held further out. */
    chain->check_status = qk_queue_check(chain->queues[0], QK_ON_QUEUE);
    chain->sync_status = qk_queue_sync(chain->queues[0], &chain->sync_ran, mark_ran);
    chain->perform_status = qk_queue_perform(chain->queues[0], &chain->perform_ran, mark_ran);
}

static void hop_back_to_the_first_queue(int depth) {
    static const char key = 0; /* a specific key: any unique address */
    struct hop_chain chain;
    memset(&chain, 0, sizeof chain);
    chain.depth = depth + 1;
    chain.key = &key;
    for (int i = 0; i < chain.depth; i++) {
        char label[32];
        snprintf(label, sizeof label, "example.hop.%d", i);
        chain.queues[i] = qk_queue_create(label, QK_QUEUE_SERIAL);
    }
    /* The original pattern's guard: each queue carries its own identity under one key. */
    qk_queue_set_specific(chain.queues[0], &key, chain.queues[0], NULL);

    printf("      (a chain through %d queues, then back to the first)\n", chain.depth);
    chain.level = 0;
    qk_queue_sync(chain.queues[0], &chain, hop);

    expect(!chain.guard_saw_first, "hop: the get_specific guard cannot see the first queue");
    expect(chain.check_status == 0, "hop: qk_queue_check(first, QK_ON_QUEUE) knows it is held");
    expect(chain.sync_status == EDEADLK && !chain.sync_ran,
           "hop: qk_queue_sync(first) returns EDEADLK, work not run");
    expect(chain.perform_status == 0 && chain.perform_ran,
           "hop: qk_queue_perform(first) runs the work inline");

    for (int i = 0; i < chain.depth; i++) qk_queue_release(chain.queues[i]);
}

int main(int argc, char **argv) {
    int depth = 4;
    if (argc > 2) {
        fprintf(stderr, "usage: %s [depth 1..%d]\n", argv[0], MAX_DEPTH - 1);
        return 2;
    }
    if (argc == 2) {
        const char *error = NULL;
        depth = (int)strtonum(argv[1], 1, MAX_DEPTH - 1, &error);
        if (error != NULL) {
            fprintf(stderr, "%s: depth '%s' is %s (expected 1..%d)\n", argv[0], argv[1], error,
                    MAX_DEPTH - 1);
            return 2;
        }
    }

    main_queue_from_main_thread();
    serial_queue_from_inside();
    hop_back_to_the_first_queue(depth);

    printf("%s\n", failures == 0 ? "all expectations held" : "SOME EXPECTATIONS FAILED");
    return failures == 0 ? 0 : 1;
}
