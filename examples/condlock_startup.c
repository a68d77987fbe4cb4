/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * condlock_startup.c — start-up orchestration of modules with dependencies, on one condition lock.
 *
 * An application starts six modules, each on its own thread:
 *
 *     config ──┬── network ──┬── sync ── ui
 *              ├── storage ──┘
 *              └── logging
 *
 * The modules are grouped in stages (every module's dependencies are in earlier stages):
 * stage 0 {config}, stage 1 {network, storage, logging}, stage 2 {sync}, stage 3 {ui}.
 * The condition lock's condition is the stage that may run. A module:
 *   1. waits for its stage with lock_when(stage) and releases at once with unlock() (which keeps
 *      the stage), so the other modules of the stage get in too and initialise in parallel;
 *   2. initialises outside the lock (random work);
 *   3. takes the lock (plain lock: whatever the stage), counts itself done, and the last module
 *      of the stage releases with unlock_with(stage + 1), which wakes exactly the modules of the
 *      next stage, in the order they began waiting, and nobody else.
 *
 * Usage: condlock_startup [runs]   (default 50, at most 1000)
 * Exits 0 when every module started after all its dependencies had finished, 1 otherwise.
 */
#include <queuekit.h>

#include <bsd/stdlib.h> /* strtonum, arc4random_uniform */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MODULES = 6, STAGES = 4, ALL_STARTED = STAGES };

typedef struct {
    const char *name;
    int stage;
    const char *needs[2];
} module_t;

static const module_t modules[MODULES] = {
    {"config", 0, {NULL, NULL}},         {"network", 1, {"config", NULL}},
    {"storage", 1, {"config", NULL}},    {"logging", 1, {"config", NULL}},
    {"sync", 2, {"network", "storage"}}, {"ui", 3, {"sync", NULL}},
};

static qk_condlock_t *startup;
/* Guarded by the lock: modules still running per stage, and a logical clock of events. */
static int remaining[STAGES];
static int clock_tick;
static int started_at[MODULES], finished_at[MODULES];

static void check(int status, const char *what) {
    if (status != 0) {
        fprintf(stderr, "%s: %s\n", what, qk_strerror(status));
        exit(1);
    }
}

static int tick(void) {
    int now;
    check(qk_condlock_lock(startup), "lock");
    now = ++clock_tick;
    check(qk_condlock_unlock(startup), "unlock");
    return now;
}

static void initialise(void) {
    volatile unsigned sink = 0;
    unsigned spins = arc4random_uniform(50000), i;
    for (i = 0; i < spins; i++) sink += i;
}

static void *run_module(void *arg) {
    int index = (int)(intptr_t)arg;
    int stage = modules[index].stage;

    /* 1. Wait for the stage; unlock() keeps it, so the stage's other modules follow at once. */
    check(qk_condlock_lock_when(startup, stage), modules[index].name);
    check(qk_condlock_unlock(startup), "unlock");
    started_at[index] = tick();

    /* 2. Initialise outside the lock, in parallel with the rest of the stage. */
    initialise();

    /* 3. Count ourselves done; the last of the stage opens the next one. */
    check(qk_condlock_lock(startup), "lock");
    finished_at[index] = ++clock_tick;
    if (--remaining[stage] == 0) {
        check(qk_condlock_unlock_with(startup, stage + 1), "unlock_with(next stage)");
    } else {
        check(qk_condlock_unlock(startup), "unlock");
    }
    return NULL;
}

static int find(const char *name) {
    int i;
    for (i = 0; i < MODULES; i++)
        if (strcmp(modules[i].name, name) == 0) return i;
    return -1;
}

int main(int argc, char **argv) {
    long long runs = 50, run;
    int failures = 0;

    if (argc > 1) {
        const char *error = NULL;
        runs = strtonum(argv[1], 1, 1000, &error);
        if (error != NULL) {
            fprintf(stderr, "runs is %s: %s\n", error, argv[1]);
            return 2;
        }
    }
    startup = qk_condlock_create(0);
    if (startup == NULL) {
        perror("qk_condlock_create");
        return 1;
    }
    qk_condlock_set_name(startup, "startup");

    for (run = 0; run < runs; run++) {
        pthread_t threads[MODULES];
        int i, d;
        memset(remaining, 0, sizeof remaining);
        for (i = 0; i < MODULES; i++) remaining[modules[i].stage]++;
        clock_tick = 0;
        check(qk_condlock_set(startup, -1), "set(not started)");

        /* Start the threads in reverse, so the late modules are the first to wait. */
        for (i = MODULES - 1; i >= 0; i--)
            if (pthread_create(&threads[i], NULL, run_module, (void *)(intptr_t)i) != 0) return 1;
        /* Everything is set up: open stage 0. */
        check(qk_condlock_set(startup, 0), "set(stage 0)");
        for (i = 0; i < MODULES; i++) pthread_join(threads[i], NULL);

        for (i = 0; i < MODULES; i++) {
            for (d = 0; d < 2 && modules[i].needs[d] != NULL; d++) {
                int need = find(modules[i].needs[d]);
                if (finished_at[need] >= started_at[i]) {
                    fprintf(stderr, "run %lld: %s started before %s finished\n", run,
                            modules[i].name, modules[need].name);
                    failures++;
                }
            }
        }
        if (qk_condlock_condition(startup) != ALL_STARTED) failures++;
        if (run == 0) {
            printf("%s order of the first run:", qk_condlock_name(startup));
            for (d = 1; d <= 2 * MODULES; d++)
                for (i = 0; i < MODULES; i++) {
                    if (started_at[i] == d) printf(" +%s", modules[i].name);
                    if (finished_at[i] == d) printf(" %s.", modules[i].name);
                }
            printf("\n");
        }
    }

    check(qk_condlock_destroy(startup), "destroy");
    if (failures != 0) {
        fprintf(stderr, "FAILED: %d dependency violation(s)\n", failures);
        return 1;
    }
    printf("%lld start-ups, every module started after its dependencies\n", runs);
    return 0;
}
