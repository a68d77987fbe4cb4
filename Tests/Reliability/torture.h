/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * torture.h — what the deadlock torture test's two halves share (see torture.c for the test
 * itself): the resources in their global order, the call trees, and the generator's entry points
 * (torture_trees.c: planning each call's documented result, generating and printing trees).
 */
#ifndef QUEUEKIT_TORTURE_H
#define QUEUEKIT_TORTURE_H

#include "reliability.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

/* ---- resources, in their global order ------------------------------------------------------ */

enum kind { K_LOCK, K_SERIAL, K_CONCURRENT, K_DB };

struct resource {
    enum kind kind;
    const char *name;
    qk_queue_t *queue; /* the queue, or the DB queue's identity queue */
    qk_dbqueue_t *db;
    qk_condlock_t *lock;
    atomic_int exclusive; /* threads inside exclusively (fresh acquisitions only) */
    atomic_int shared;    /* threads inside shared */
};

/* The resources, in their global order (defined in torture.c). */
enum { NRES = 11 };
extern struct resource resources[NRES];

/* ---- trees ----------------------------------------------------------------------------------- */

enum op {
    OP_SYNC,
    OP_BARRIER_SYNC,
    OP_PERFORM, /* queues */
    OP_READ,
    OP_WRITE,
    OP_WRITE_ASYNC,
    OP_FLUSH,
    OP_DESTROY, /* DB queues */
    OP_LOCK,
    OP_LOCK_WHEN,
    OP_LOCK_WHEN_UNTIL,
    OP_TRYLOCK,
    OP_TRYLOCK_WHEN, /* locks */
    OP_LOCK_UNTIL_SHORT,
    OP_WHEN_MISS,
    OP_SET,
    OP_UNLOCK_FOREIGN,
};
/* Each op's name, as trees are printed. */
extern const char *const op_names[];

enum mode { M_NONE, M_SHARED, M_EXCLUSIVE };

#define MAX_NODES   48
#define MAX_KIDS    3
#define MAX_DEPTH   6
#define MAX_ROOTS   3
#define NOT_RUN_YET INT32_MIN
#define SKIPPED_HOP (INT32_MIN + 1)

struct node {
    enum op op;
    int res;
    int expect;       /* the documented result */
    int alternative;  /* a second acceptable result (timing-dependent calls), or -1 */
    bool has_work;    /* the call runs work (children, or the async leaf's checks) */
    bool fresh;       /* a real acquisition, not an inline reentrant run */
    enum mode inside; /* how the chain holds `res` inside the work */
    int kids[MAX_KIDS];
    int kid_count;
    int depth;
    int result;      /* what the call returned */
    atomic_int runs; /* how many times its work ran */
};

struct tree {
    uint64_t seed;
    int count;
    int roots[MAX_ROOTS];
    int root_count;
    struct node nodes[MAX_NODES];
    pthread_t lock_holder[NRES]; /* at run time: which thread took each lock */
};

/* What the call chain holds, as the generator tracks it. */
struct model {
    enum mode mode[NRES];
};

/* The phase without a resource order (see torture.c). */
extern bool unordered_phase;

/* How long the timed lock_when of a tree waits: long in the ordered phase (it must succeed), short
 * in the unordered one (it may be part of a ring, which only its deadline breaks). */
extern uint64_t when_until_ns;

/* The master seed every tree's seed derives from (printed with a failing tree). */
extern uint64_t master_seed;

/* Fills `t` with the random tree of `seed`, every node's documented result planned. */
void generate(struct tree *t, uint64_t seed);

/* A status (or NOT_RUN_YET, SKIPPED_HOP) by name. */
const char *status_name(int status);

/* Prints `t`: each call, what it should return and run, what it did. */
void print_tree(FILE *out, const struct tree *t);

#endif
