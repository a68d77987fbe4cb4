/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * queue_current.c — "which queue am I on?", answered on custom, global and main queues.
 *
 * dispatch_get_current_queue() is deprecated, and the replacement the original pattern describes — give every
 * queue a specific that points back at it, then dispatch_get_specific() — needs every queue to be
 * registered by hand, including main and global queues. In QueueKit every queue is registered
 * from birth: qk_queue_current() and qk_queue_copy_current_label() just work.
 *
 * The program walks through:
 *   1. the main thread, outside any block: the current queue is the main queue;
 *   2. custom queues, serial and concurrent, and a queue that targets another (current is the
 *      inner one, the target counts as current too);
 *   3. the global queues of every QoS class (each has a non-empty label);
 *   4. an async chain: a global queue hands a result back to the main queue, the classic
 *      "work in the background, report on main" pattern; qk_main() then drives the main queue,
 *      and the last main-queue block exits the process.
 *
 * Exits 0 when every expectation holds, 1 otherwise. Takes no arguments.
 */
#include <queuekit.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

static void expect(int condition, const char *what) {
    printf("%s %s\n", condition ? "ok  " : "FAIL", what);
    if (!condition) failures++;
}

/* Prints the calling thread's current queue, as a C program would log it. */
static void print_current(const char *where) {
    char label[64];
    size_t length = qk_queue_copy_current_label(label, sizeof label);
    printf("      %s: current queue '%s'%s\n", where, label,
           length >= sizeof label ? " (truncated)" : "");
}

/* ---- 2. Custom queues -------------------------------------------------------------------- */

struct observation {
    qk_queue_t *expected; /* the queue the block was submitted to */
    qk_queue_t *target;   /* its target, or NULL */
    int current_ok;
    int target_current;
    int label_ok;
};

static void observe(void *context) {
    struct observation *seen = context;
    char label[64];
    qk_queue_copy_current_label(label, sizeof label);
    seen->current_ok = qk_queue_current() == seen->expected;
    seen->label_ok = strcmp(label, qk_queue_label(seen->expected)) == 0;
    seen->target_current = seen->target != NULL && qk_queue_is_current(seen->target);
    print_current("inside a block");
}

static void custom_queues(void) {
    qk_queue_t *serial = qk_queue_create("example.serial", QK_QUEUE_SERIAL);
    qk_queue_t *concurrent = qk_queue_create("example.concurrent", QK_QUEUE_CONCURRENT);
    /* A queue whose blocks run on `serial`: dispatch's target-queue hierarchy. */
    qk_queue_t *inner = qk_queue_create_with_target("example.inner", QK_QUEUE_SERIAL, serial);
    struct observation seen;

    memset(&seen, 0, sizeof seen);
    seen.expected = serial;
    qk_queue_sync(serial, &seen, observe);
    expect(seen.current_ok && seen.label_ok, "serial queue: current and label");

    memset(&seen, 0, sizeof seen);
    seen.expected = concurrent;
    qk_queue_sync(concurrent, &seen, observe);
    expect(seen.current_ok && seen.label_ok, "concurrent queue: current and label");

    memset(&seen, 0, sizeof seen);
    seen.expected = inner;
    seen.target = serial;
    qk_queue_sync(inner, &seen, observe);
    expect(seen.current_ok && seen.label_ok, "targeted queue: the current queue is the inner one");
    expect(seen.target_current, "targeted queue: ...and its target counts as current");

    qk_queue_release(inner);
    qk_queue_release(concurrent);
    qk_queue_release(serial);
}

/* ---- 3. Global queues ------------------------------------------------------------------- */

static void global_queues(void) {
    static const qk_qos_t classes[] = {QK_QOS_BACKGROUND, QK_QOS_UTILITY, QK_QOS_DEFAULT,
                                       QK_QOS_USER_INITIATED, QK_QOS_USER_INTERACTIVE};
    int all_ok = 1;
    for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++) {
        struct observation seen;
        memset(&seen, 0, sizeof seen);
        seen.expected = qk_queue_global(classes[i]);
        qk_queue_sync(seen.expected, &seen, observe);
        all_ok &= seen.current_ok && seen.label_ok && qk_queue_label(seen.expected)[0] != '\0';
    }
    expect(all_ok, "global queues: current and a non-empty label for every QoS class");
}

/* ---- 4. Background work reporting back on the main queue ------------------------------- */

struct job {
    int result;
    int computed_on_global;
};

static void report_on_main(void *context) {
    struct job *job = context;
    print_current("reporting");
    expect(qk_queue_current() == qk_queue_main(),
           "main queue block: the current queue is the main queue");
    expect(qk_queue_check(qk_queue_main(), QK_ON_QUEUE_AS_BARRIER) == 0,
           "main queue block: it runs the main queue exclusively");
    expect(job->computed_on_global, "the job ran on a global queue");
    expect(job->result == 42, "the job's result reached the main queue");

    printf("%s\n", failures == 0 ? "all expectations held" : "SOME EXPECTATIONS FAILED");
    exit(failures == 0 ? 0 : 1); /* qk_main never returns: a main-queue block ends the program */
}

static void compute_in_background(void *context) {
    struct job *job = context;
    print_current("computing");
    job->computed_on_global = qk_queue_current() == qk_queue_global(QK_QOS_UTILITY);
    job->result = 6 * 7;
    /* Hand the result back to the main queue: it runs once the main thread is in qk_main(). */
    qk_queue_async(qk_queue_main(), job, report_on_main);
}

int main(void) {
    /* ---- 1. The main thread, outside any block ---- */
    print_current("main thread");
    expect(qk_queue_current() == qk_queue_main(),
           "main thread: the current queue is the main queue");
    expect(qk_queue_is_current(qk_queue_main()), "main thread: qk_queue_is_current(main)");
    expect(qk_queue_copy_current_label(NULL, 0) == strlen(qk_queue_label(qk_queue_main())),
           "main thread: qk_queue_copy_current_label(NULL, 0) measures the main queue's label");

    custom_queues();
    global_queues();

    static struct job job;
    qk_queue_async(qk_queue_global(QK_QOS_UTILITY), &job, compute_in_background);
    qk_main(); /* runs the main queue; report_on_main exits */
}
