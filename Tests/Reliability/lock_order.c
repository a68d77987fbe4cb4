/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * lock_order.c — the lock-order witness through the installed library, for what a Swift test
 * process cannot do to itself (include/queuekit.h, "Lock-order witness"):
 *
 *   - two orders at different times, on two named threads: one report, in the documented format,
 *     with the call sites dladdr finds (this program is linked with -rdynamic, so its functions
 *     have names);
 *   - QUEUEKIT_LOCK_ORDER=report|abort|off and an invalid value, read at load (the program runs
 *     itself with --print-mode under each);
 *   - abort mode: the report on stderr, then SIGABRT (in a child);
 *   - fork(): the child's graph starts empty, the forking thread keeps what it holds, mode and
 *     handler carry over; the parent is unaffected.
 *
 *   lock_order [--print-mode]
 *
 * Every wait is bounded: children run under alarm(), the threads are joined after they finished
 * their few calls (nothing here ever waits for another thread inside QueueKit).
 */
#define _GNU_SOURCE
#include "reliability.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

static int checks, failures;

#define CHECK(condition)                                                                           \
    do {                                                                                           \
        checks++;                                                                                  \
        if (!(condition)) {                                                                        \
            failures++;                                                                            \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #condition);               \
        }                                                                                          \
    } while (0)
#define CHECK_EQ(call, want)                                                                       \
    do {                                                                                           \
        long long got_ = (long long)(call), want_ = (long long)(want);                             \
        checks++;                                                                                  \
        if (got_ != want_) {                                                                       \
            failures++;                                                                            \
            fprintf(stderr, "%s:%d: %s is %lld, expected %lld\n", __FILE__, __LINE__, #call, got_, \
                    want_);                                                                        \
        }                                                                                          \
    } while (0)

/* The reports the handler received (the handler runs on the reporting thread). */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_report[4096];
static int report_count;

static void record_report(void *context, const char *report) {
    (void)context;
    pthread_mutex_lock(&log_lock);
    report_count++;
    snprintf(last_report, sizeof last_report, "%s", report);
    pthread_mutex_unlock(&log_lock);
}

static bool starts_with(const char *text, const char *prefix) {
    return strncmp(text, prefix, strlen(prefix)) == 0;
}

static int reports(void) {
    pthread_mutex_lock(&log_lock);
    int count = report_count;
    pthread_mutex_unlock(&log_lock);
    return count;
}

static qk_condlock_t *named_lock(const char *name) {
    qk_condlock_t *lock = qk_condlock_create(0);
    if (lock == NULL) abort();
    qk_condlock_set_name(lock, name);
    return lock;
}

/* Takes `first`, then `second`, and gives both back. Not static: the report names it. */
void take_in_order(qk_condlock_t *first, qk_condlock_t *second) {
    CHECK_EQ(qk_condlock_lock(first), 0);
    CHECK_EQ(qk_condlock_lock(second), 0);
    CHECK_EQ(qk_condlock_unlock(second), 0);
    CHECK_EQ(qk_condlock_unlock(first), 0);
}

struct order {
    qk_condlock_t *first, *second;
    const char *thread;
};

static void *order_thread(void *argument) {
    struct order *order = argument;
    pthread_setname_np(pthread_self(), order->thread);
    take_in_order(order->first, order->second);
    return NULL;
}

/* Runs one order on a new thread named `name`, to its end. */
static void on_thread(const char *name, qk_condlock_t *first, qk_condlock_t *second) {
    struct order order = {first, second, name};
    pthread_t thread;
    CHECK_EQ(pthread_create(&thread, NULL, order_thread, &order), 0);
    CHECK_EQ(pthread_join(thread, NULL), 0);
}

/* ---- two orders at different times --------------------------------------------------------- */

static void test_two_orders(void) {
    qk_condlock_t *a = named_lock("c.a"), *b = named_lock("c.b");
    int before = reports();
    on_thread("c-first", a, b);
    CHECK_EQ(reports(), before);
    on_thread("c-second", b, a);
    CHECK_EQ(reports(), before + 1);
    on_thread("c-third", b, a); /* the same cycle: never again */
    on_thread("c-fourth", a, b);
    CHECK_EQ(reports(), before + 1);
    pthread_mutex_lock(&log_lock);
    CHECK(starts_with(last_report,
                      "QueueKit: lock-order inversion (potential deadlock): "
                      "qk_condlock_lock(condition lock \"c.a\") closes a cycle of 2\n"));
    CHECK(strstr(last_report, "  condition lock \"c.a\" -> condition lock \"c.b\": "
                              "qk_condlock_lock, first by thread ") != NULL);
    CHECK(strstr(last_report, "\"c-first\" at take_in_order+0x") != NULL);
    CHECK(strstr(last_report, "\"c-second\" at take_in_order+0x") != NULL);
    CHECK(strstr(last_report, "lock_order)  <- new\n") != NULL);
    pthread_mutex_unlock(&log_lock);
    CHECK_EQ(qk_condlock_destroy(a), 0);
    CHECK_EQ(qk_condlock_destroy(b), 0);
}

/* ---- the environment variable -------------------------------------------------------------- */

/* Runs this program with --print-mode and QUEUEKIT_LOCK_ORDER=`value`: the mode it printed, and
 * its stderr in `err`. */
static int mode_under(const char *self, const char *value, char *err, size_t size) {
    int out_pipe[2], err_pipe[2];
    if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) abort();
    pid_t child = fork();
    if (child == 0) {
        dup2(out_pipe[1], STDOUT_FILENO);
        dup2(err_pipe[1], STDERR_FILENO);
        close(out_pipe[0]);
        close(err_pipe[0]);
        setenv("QUEUEKIT_LOCK_ORDER", value, 1);
        execl(self, self, "--print-mode", (char *)NULL);
        _exit(127);
    }
    close(out_pipe[1]);
    close(err_pipe[1]);
    char out[64] = {0};
    ssize_t got = read(out_pipe[0], out, sizeof out - 1);
    size_t length = 0;
    ssize_t chunk;
    while (length < size - 1 && (chunk = read(err_pipe[0], err + length, size - 1 - length)) > 0)
        length += (size_t)chunk;
    err[length] = '\0';
    close(out_pipe[0]);
    close(err_pipe[0]);
    int status = 0;
    CHECK_EQ(waitpid(child, &status, 0), child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return got > 0 ? atoi(out) : -1;
}

static void test_environment(const char *self) {
    char err[1024];
    CHECK_EQ(mode_under(self, "report", err, sizeof err), QK_LOCK_ORDER_REPORT);
    CHECK_EQ(strlen(err), 0);
    CHECK_EQ(mode_under(self, "abort", err, sizeof err), QK_LOCK_ORDER_ABORT);
    CHECK_EQ(mode_under(self, "off", err, sizeof err), QK_LOCK_ORDER_OFF);
    CHECK_EQ(strlen(err), 0);
    CHECK_EQ(mode_under(self, "loud", err, sizeof err), QK_LOCK_ORDER_OFF);
    CHECK(strstr(err, "QUEUEKIT_LOCK_ORDER") != NULL);
    CHECK(strchr(err, '\n') != NULL && strchr(err, '\n')[1] == '\0'); /* one line */
}

/* ---- abort mode ----------------------------------------------------------------------------- */

static void test_abort_mode(void) {
    int err_pipe[2];
    if (pipe(err_pipe) != 0) abort();
    pid_t child = fork();
    if (child == 0) {
        alarm(20);
        dup2(err_pipe[1], STDERR_FILENO);
        close(err_pipe[0]);
        qk_set_lock_order_handler(NULL, NULL); /* the default: stderr */
        qk_set_lock_order_mode(QK_LOCK_ORDER_ABORT);
        qk_condlock_t *a = named_lock("abort.a"), *b = named_lock("abort.b");
        take_in_order(a, b);
        take_in_order(b, a); /* reported, then abort() */
        _exit(3);
    }
    close(err_pipe[1]);
    char text[4096];
    size_t length = 0;
    ssize_t got;
    while (length < sizeof text - 1 &&
           (got = read(err_pipe[0], text + length, sizeof text - 1 - length)) > 0)
        length += (size_t)got;
    text[length] = '\0';
    close(err_pipe[0]);
    int status = 0;
    CHECK_EQ(waitpid(child, &status, 0), child);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    CHECK(starts_with(text, "QueueKit: lock-order inversion (potential deadlock): "
                            "qk_condlock_lock(condition lock \"abort.a\")"));
    CHECK(strstr(text, "<- new\n") != NULL);
}

/* ---- fork() ----------------------------------------------------------------------------------- */

static void test_fork(void) {
    qk_condlock_t *a = named_lock("fork.a"), *b = named_lock("fork.b");
    qk_condlock_t *held = named_lock("fork.held"), *inner = named_lock("fork.inner");
    on_thread("f-parent", a, b);
    int before = reports();
    CHECK_EQ(qk_condlock_lock(held), 0);
    pid_t child = fork();
    if (child == 0) {
        alarm(20);
        int status = 0;
        /* The parent's graph is gone: the reverse order closes nothing. */
        take_in_order(b, a);
        if (reports() != before) status |= 1;
        if (qk_lock_order_mode() != QK_LOCK_ORDER_REPORT) status |= 2;
        /* The forking thread still holds `held` as the witness sees it: held -> inner is an edge,
         * and its reverse, a cycle, reported to the handler that carried over. */
        if (qk_condlock_lock(inner) != 0 || qk_condlock_unlock(inner) != 0) status |= 4;
        if (qk_condlock_unlock(held) != 0) status |= 4;
        take_in_order(inner, held);
        if (reports() != before + 1) status |= 8;
        _exit(status | (failures > 0 ? 16 : 0));
    }
    int status = 0;
    CHECK_EQ(waitpid(child, &status, 0), child);
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 0);
    /* The parent is unaffected: its graph still has a -> b. */
    CHECK_EQ(qk_condlock_unlock(held), 0);
    on_thread("f-parent-2", b, a);
    CHECK_EQ(reports(), before + 1);
    CHECK_EQ(qk_condlock_destroy(a), 0);
    CHECK_EQ(qk_condlock_destroy(b), 0);
    CHECK_EQ(qk_condlock_destroy(held), 0);
    CHECK_EQ(qk_condlock_destroy(inner), 0);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--print-mode") == 0) {
        printf("%d\n", qk_lock_order_mode());
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "usage: lock_order [--print-mode]\n");
        return 2;
    }
    char self[4096];
    ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
    if (length <= 0) abort();
    self[length] = '\0';

    CHECK_EQ(qk_set_lock_order_mode(7), EINVAL);
    CHECK_EQ(qk_set_lock_order_handler(record_report, NULL), 0);
    CHECK_EQ(qk_set_lock_order_mode(QK_LOCK_ORDER_REPORT), 0);
    CHECK_EQ(qk_lock_order_mode(), QK_LOCK_ORDER_REPORT);
    test_two_orders();
    test_environment(self);
    test_abort_mode();
    test_fork();
    CHECK_EQ(qk_set_lock_order_mode(QK_LOCK_ORDER_OFF), 0);
    printf("lock_order: %d checks, %d failures\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
