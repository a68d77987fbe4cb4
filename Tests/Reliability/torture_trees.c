/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * torture_trees.c — the deadlock torture test's trees (see torture.c): each node's call is
 * planned under what the call chain holds, with its documented result computed before it runs;
 * only blocking calls that respect the resource order are generated in the ordered phase.
 */
#include "torture.h"

/* ---- resources, in their global order ------------------------------------------------------ */

struct resource resources[NRES] = {
    {.kind = K_LOCK, .name = "L0"},       {.kind = K_SERIAL, .name = "S0"},
    {.kind = K_CONCURRENT, .name = "C0"}, {.kind = K_DB, .name = "D0"},
    {.kind = K_LOCK, .name = "L1"},       {.kind = K_DB, .name = "D1"},
    {.kind = K_SERIAL, .name = "S1"},     {.kind = K_CONCURRENT, .name = "C1"},
    {.kind = K_LOCK, .name = "L2"},       {.kind = K_SERIAL, .name = "S2"},
    {.kind = K_DB, .name = "D2"},
};

const char *const op_names[] = {
    "sync",
    "barrier_sync",
    "perform",
    "read",
    "write",
    "write_async",
    "flush",
    "destroy",
    "lock",
    "lock_when(0)",
    "lock_when_until(0,+10s)",
    "trylock",
    "trylock_when(0)",
    "lock_until(+1ms)",
    "lock_when_until(1,+1ms)",
    "set(0)",
    "unlock(not holder)",
};
static const enum op queue_ops[] = {OP_SYNC, OP_BARRIER_SYNC, OP_PERFORM};
static const enum op db_ops[] = {OP_READ, OP_WRITE, OP_WRITE_ASYNC, OP_FLUSH, OP_DESTROY};
static const enum op lock_ops[] = {OP_LOCK,      OP_LOCK_WHEN,    OP_LOCK_WHEN_UNTIL,
                                   OP_TRYLOCK,   OP_TRYLOCK_WHEN, OP_LOCK_UNTIL_SHORT,
                                   OP_WHEN_MISS, OP_SET,          OP_UNLOCK_FOREIGN};

bool unordered_phase;

uint64_t when_until_ns = 10000000000ull; /* 2 ms in the unordered phase */

static int highest_held(const struct model *m) {
    for (int r = NRES - 1; r >= 0; r--)
        if (m->mode[r] != M_NONE) return r;
    return -1;
}

/* Fills `n` for (op, res) under `m`; false when the combination may not be generated (a
 * blocking call out of order, or a call that makes no sense here). */
static bool plan_call(struct node *n, const struct model *m, enum op op, int res, bool ordered);

static bool plan(struct node *n, const struct model *m, enum op op, int res) {
    if (!unordered_phase) return plan_call(n, m, op, res, res > highest_held(m));
    if (!plan_call(n, m, op, res, true)) return false;
    /* Any wait may now close a ring: an untimed one may be refused, a timed one time out. */
    bool blocking = n->fresh || ((op == OP_SET || op == OP_FLUSH) && n->expect == 0);
    if (op == OP_LOCK_WHEN_UNTIL && n->fresh)
        n->alternative = ETIMEDOUT;
    else if (blocking && n->alternative < 0)
        n->alternative = EDEADLK;
    return true;
}

static bool plan_call(struct node *n, const struct model *m, enum op op, int res, bool ordered) {
    enum mode held = m->mode[res];
    enum kind kind = resources[res].kind;
    *n = (struct node){.op = op, .res = res, .alternative = -1, .result = NOT_RUN_YET};
    switch (op) {
    case OP_SYNC:
        if (held == M_EXCLUSIVE) {
            n->expect = EDEADLK;
            return true;
        }
        if (held == M_SHARED) {
            n->has_work = true;
            n->inside = M_SHARED;
            return true;
        }
        if (!ordered) return false;
        n->has_work = n->fresh = true;
        n->inside = kind == K_SERIAL ? M_EXCLUSIVE : M_SHARED;
        return true;
    case OP_BARRIER_SYNC:
        if (held != M_NONE) {
            n->expect = EDEADLK;
            return true;
        }
        if (!ordered) return false;
        n->has_work = n->fresh = true;
        n->inside = M_EXCLUSIVE;
        return true;
    case OP_PERFORM:
        if (held != M_NONE) {
            n->has_work = true;
            n->inside = held;
            return true;
        }
        return plan_call(n, m, OP_SYNC, res, ordered) && (n->op = OP_PERFORM, true);
    case OP_READ:
        if (held != M_NONE) {
            n->has_work = true;
            n->inside = held;
            return true;
        }
        if (!ordered) return false;
        n->has_work = n->fresh = true;
        n->inside = M_SHARED;
        return true;
    case OP_WRITE:
        if (held == M_EXCLUSIVE) {
            n->has_work = true;
            n->inside = M_EXCLUSIVE;
            return true;
        }
        if (held == M_SHARED) {
            n->expect = EDEADLK;
            return true;
        }
        if (!ordered) return false;
        n->has_work = n->fresh = true;
        n->inside = M_EXCLUSIVE;
        return true;
    case OP_WRITE_ASYNC:
        n->has_work = true; /* a leaf: runs later, on the DB queue's writer */
        return true;
    case OP_FLUSH:
        if (held != M_NONE) {
            n->expect = EDEADLK;
            return true;
        }
        return ordered;
    case OP_DESTROY:
        if (held != M_NONE) {
            n->expect = EBUSY;
            return true;
        }
        return false; /* never destroy a queue the other trees use */
    case OP_LOCK:
    case OP_LOCK_WHEN:
    case OP_LOCK_WHEN_UNTIL:
    case OP_SET:
        if (held != M_NONE) {
            n->expect = EDEADLK;
            return true;
        }
        if (!ordered) return false;
        if (op != OP_SET) {
            n->has_work = n->fresh = true;
            n->inside = M_EXCLUSIVE;
        }
        return true;
    case OP_TRYLOCK:
    case OP_TRYLOCK_WHEN:
        if (held != M_NONE) {
            n->expect = EBUSY;
            return true;
        }
        n->has_work = n->fresh = true; /* may fail: another thread may hold it */
        n->inside = M_EXCLUSIVE;
        n->alternative = EBUSY;
        return true;
    case OP_LOCK_UNTIL_SHORT:
        if (held != M_NONE) {
            n->expect = EDEADLK;
            return true;
        }
        n->has_work = n->fresh = true;
        n->inside = M_EXCLUSIVE;
        n->alternative = ETIMEDOUT;
        return true;
    case OP_WHEN_MISS: /* the condition is never 1 */
        n->expect = held != M_NONE ? EDEADLK : ETIMEDOUT;
        return true;
    case OP_UNLOCK_FOREIGN:
        if (held != M_NONE) return false;
        n->expect = EPERM;
        return true;
    }
    (void)kind;
    return false;
}

static int generate_node(struct tree *t, rl_rng *rng, struct model *m, int depth);

/* Generates the children of node `index` under the model it establishes. */
static void generate_kids(struct tree *t, rl_rng *rng, struct model *m, int index, int depth) {
    struct node *n = &t->nodes[index];
    if (!n->has_work || n->op == OP_WRITE_ASYNC || depth >= MAX_DEPTH) return;
    int wanted = depth < 3 ? 1 + (int)rl_below(rng, MAX_KIDS) : (int)rl_below(rng, MAX_KIDS);
    enum mode saved = m->mode[n->res];
    if (n->inside > saved) m->mode[n->res] = n->inside;
    for (int k = 0; k < wanted; k++) {
        int kid = generate_node(t, rng, m, depth + 1);
        if (kid < 0) break;
        t->nodes[index].kids[t->nodes[index].kid_count++] = kid;
    }
    m->mode[n->res] = saved;
}

static int generate_node(struct tree *t, rl_rng *rng, struct model *m, int depth) {
    if (t->count >= MAX_NODES) return -1;
    for (int attempt = 0; attempt < 32; attempt++) {
        int res = (int)rl_below(rng, NRES);
        enum op op;
        switch (resources[res].kind) {
        case K_LOCK:
            op = lock_ops[rl_below(rng, sizeof lock_ops / sizeof lock_ops[0])];
            break;
        case K_DB:
            op = db_ops[rl_below(rng, sizeof db_ops / sizeof db_ops[0])];
            break;
        default:
            op = queue_ops[rl_below(rng, sizeof queue_ops / sizeof queue_ops[0])];
            break;
        }
        struct node candidate;
        if (!plan(&candidate, m, op, res)) continue;
        int index = t->count++;
        t->nodes[index] = candidate;
        t->nodes[index].depth = depth;
        generate_kids(t, rng, m, index, depth);
        return index;
    }
    return -1;
}

void generate(struct tree *t, uint64_t seed) {
    memset(t, 0, sizeof *t);
    t->seed = seed;
    rl_rng rng = {seed};
    struct model m = {{M_NONE}};
    int roots = 1 + (int)rl_below(&rng, MAX_ROOTS);
    for (int r = 0; r < roots; r++) {
        int index = generate_node(t, &rng, &m, 0);
        if (index >= 0) t->roots[t->root_count++] = index;
    }
}

const char *status_name(int status) {
    static const struct {
        int code;
        const char *name;
    } names[] = {
        {0, "0"},
        {EINVAL, "EINVAL"},
        {EBUSY, "EBUSY"},
        {ETIMEDOUT, "ETIMEDOUT"},
        {EPERM, "EPERM"},
        {EDEADLK, "EDEADLK"},
        {ENOMEM, "ENOMEM"},
        {NOT_RUN_YET, "not called"},
        {SKIPPED_HOP, "skipped (thread hop)"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].code == status) return names[i].name;
    return "?";
}

static void print_node(FILE *out, const struct tree *t, int index) {
    const struct node *n = &t->nodes[index];
    fprintf(out, "  %*s%s %s  expect %s", n->depth * 2, "", op_names[n->op], resources[n->res].name,
            status_name(n->expect));
    if (n->alternative >= 0) fprintf(out, " or %s", status_name(n->alternative));
    if (n->has_work && !n->expect)
        fprintf(out, ", runs once%s",
                n->op == OP_WRITE_ASYNC ? " later"
                : n->fresh              ? ""
                                        : " inline");
    fprintf(out, "  | got %s, ran %d\n", status_name(n->result), atomic_load(&n->runs));
    for (int k = 0; k < n->kid_count; k++) print_node(out, t, n->kids[k]);
}

uint64_t master_seed;

void print_tree(FILE *out, const struct tree *t) {
    fprintf(
        out, "tree seed 0x%016llx (master seed 0x%016llx; rerun alone: torture --tree 0x%llx)\n",
        (unsigned long long)t->seed, (unsigned long long)master_seed, (unsigned long long)t->seed);
    for (int r = 0; r < t->root_count; r++) print_node(out, t, t->roots[r]);
}
