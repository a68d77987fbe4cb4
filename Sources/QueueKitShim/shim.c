/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

#define _GNU_SOURCE
#include "queuekit_shim.h"
/* The public header, for its status list (relative: the shim has no other use for it). */
#include "../../include/queuekit.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

__thread qkshim_tls_calls_t qkshim_tls_calls QKSHIM_TLS;
__attribute__((visibility("hidden"))) _Atomic uint8_t qkshim_slow_paths;
/* The storage behind the header's const qkshim_tsan_mode. */
__attribute__((visibility("hidden"))) uint8_t qkshim_tsan_mode_storage;

/* Whether this library itself is built with -fsanitize=thread: then the sanitizer sees its
 * memory accesses and checks them, and nothing hides them. */
#if defined(__SANITIZE_THREAD__)
#define QKSHIM_INSTRUMENTED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define QKSHIM_INSTRUMENTED 1
#endif
#endif
#ifndef QKSHIM_INSTRUMENTED
#define QKSHIM_INSTRUMENTED 0
#endif

/* ThreadSanitizer's annotation interface, weak: NULL unless the program runs under it. */
extern void __tsan_mutex_pre_lock(void *addr, unsigned flags) __attribute__((weak));
extern void __tsan_mutex_post_lock(void *addr, unsigned flags, int recursion) __attribute__((weak));
extern int __tsan_mutex_pre_unlock(void *addr, unsigned flags) __attribute__((weak));
extern void __tsan_mutex_post_unlock(void *addr, unsigned flags) __attribute__((weak));
extern void __tsan_acquire(void *addr) __attribute__((weak));
extern void __tsan_release(void *addr) __attribute__((weak));
extern void AnnotateIgnoreWritesBegin(const char *file, int line) __attribute__((weak));
extern void AnnotateIgnoreWritesEnd(const char *file, int line) __attribute__((weak));

/* How deeply the calling thread is inside QueueKit's own code, outside the user code it runs. */
static __thread unsigned qkshim_tsan_internal_depth QKSHIM_TLS;

/* Called only when qkshim_tsan_mode says the runtime is there. */
void qkshim_tsan_locked(const void *object, unsigned flags) {
    __tsan_mutex_pre_lock((void *)object, flags);
    __tsan_mutex_post_lock((void *)object, flags, 0);
}

void qkshim_tsan_unlocking(const void *object, unsigned flags) {
    __tsan_mutex_pre_unlock((void *)object, flags);
    __tsan_mutex_post_unlock((void *)object, flags);
}

void qkshim_tsan_release(const void *token) {
    __tsan_release((void *)token);
}
void qkshim_tsan_acquire(const void *token) {
    __tsan_acquire((void *)token);
}

/* Defined in Swift (MetadataWarmUp.swift): instantiates the generic metadata of QueueKit's types. */
void qkshim_warm_up_metadata(void);
static pthread_once_t qkshim_warm_up_once = PTHREAD_ONCE_INIT;

/* Called only when qkshim_tsan_mode says to hide internals. (The sanitizer's ignore counter
 * covers reads and writes alike.) The first call, on whichever thread, first instantiates the
 * Swift metadata of QueueKit's generic types while the others wait (pthread_once): two threads
 * instantiating one type at once take the runtime's wait-queue mutexes in an order the
 * sanitizer's lock-order detector reports (MetadataWarmUp.swift). */
void qkshim_tsan_internal_begin(void) {
    if (qkshim_tsan_internal_depth++ == 0) {
        AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
        pthread_once(&qkshim_warm_up_once, qkshim_warm_up_metadata);
    }
}

void qkshim_tsan_internal_end(void) {
    if (--qkshim_tsan_internal_depth == 0) AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
}

unsigned qkshim_tsan_user_code_begin(void) {
    unsigned depth = qkshim_tsan_internal_depth;
    if (depth != 0) {
        qkshim_tsan_internal_depth = 0;
        AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
    }
    return depth;
}

void qkshim_tsan_user_code_end(unsigned depth) {
    if (depth != 0) {
        AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
        qkshim_tsan_internal_depth = depth;
    }
}

__attribute__((constructor)) static void qkshim_tsan_mode_init(void) {
    bool runtime = __tsan_mutex_pre_lock && __tsan_mutex_post_lock && __tsan_mutex_pre_unlock &&
                   __tsan_mutex_post_unlock && __tsan_acquire && __tsan_release;
    bool ignores = AnnotateIgnoreWritesBegin && AnnotateIgnoreWritesEnd;
    /* An instrumented build (SwiftPM's --sanitize=thread) needs neither: the sanitizer sees its
     * atomics and accesses, and its own tests keep judging them unaided. */
    qkshim_tsan_mode_storage =
        QKSHIM_INSTRUMENTED || !runtime
            ? 0
            : QKSHIM_TSAN_ANNOTATE | (ignores ? QKSHIM_TSAN_HIDE_INTERNALS : 0);
    if (qkshim_tsan_mode_storage != 0) qkshim_slow_paths_change(QKSHIM_SLOW_TSAN, true);
}
__thread uint64_t qkshim_tls_thread_id QKSHIM_TLS;

void *_Atomic qkshim_main_frame;
_Atomic bool qkshim_main_released;

static uint64_t qkshim_next_thread_id = 0;

uintptr_t qkshim_condlock_tag_storage = 0;

uint64_t qkshim_thread_id_assign(void) {
    uint64_t id = __atomic_add_fetch(&qkshim_next_thread_id, 1, __ATOMIC_RELAXED);
    qkshim_tls_thread_id = id;
    return id;
}

__thread uint8_t qkshim_tls_thread_kind QKSHIM_TLS;

bool qkshim_is_main_thread_assign(void) {
    bool is_main = (pid_t)syscall(SYS_gettid) == getpid();
    qkshim_tls_thread_kind = is_main ? 1 : 2;
    return is_main;
}

__thread void *qkshim_tls_record QKSHIM_TLS;

static pthread_key_t qkshim_record_key;
static pthread_once_t qkshim_record_key_once = PTHREAD_ONCE_INIT;
static void (*qkshim_record_on_exit)(void *);

/* A thread-exit hook runs QueueKit's code alone (no user code): all of it is hidden from
 * ThreadSanitizer, the record's release and deinit included (the Swift runtime instantiates
 * metadata there on first use, through intercepted memcpy and strcmp). */
void qkshim_run_exit_hook(void (*hook)(void *), void *argument) {
    bool hide = qkshim_tsan_mode & QKSHIM_TSAN_HIDE_INTERNALS;
    if (hide) qkshim_tsan_internal_begin();
    hook(argument);
    if (hide) qkshim_tsan_internal_end();
}

static void qkshim_record_destructor(void *record) {
    qkshim_tls_record = NULL;
    void (*on_exit)(void *) = __atomic_load_n(&qkshim_record_on_exit, __ATOMIC_ACQUIRE);
    qkshim_run_exit_hook(on_exit, record);
}

static void qkshim_record_key_create(void) {
    int rc = pthread_key_create(&qkshim_record_key, qkshim_record_destructor);
    if (rc != 0) qkshim_fatal_errno("pthread_key_create (thread exits cannot be tracked)", rc);
}

void qkshim_record_install(void *record, void (*on_exit)(void *record)) {
    /* The same function every time: an atomic store, as exiting threads read it concurrently. */
    __atomic_store_n(&qkshim_record_on_exit, on_exit, __ATOMIC_RELEASE);
    pthread_once(&qkshim_record_key_once, qkshim_record_key_create);
    int rc = pthread_setspecific(qkshim_record_key, record);
    if (rc != 0) qkshim_fatal_errno("pthread_setspecific", rc);
    qkshim_tls_record = record;
}

__thread uint32_t qkshim_tls_condlocks_held QKSHIM_TLS;

size_t qkshim_symbol_name(const void *address, char *buffer, size_t size, size_t *offset) {
    Dl_info info;
    if (address == NULL || dladdr(address, &info) == 0 || info.dli_sname == NULL) return 0;
    if (offset != NULL) *offset = (size_t)((const char *)address - (const char *)info.dli_saddr);
    return qkshim_strlcpy(buffer, info.dli_sname, size);
}

static void (*_Atomic qkshim_record_maker)(void);

void qkshim_record_maker_set(void (*maker)(void)) {
    __atomic_store_n((void (**)(void)) & qkshim_record_maker, maker, __ATOMIC_RELEASE);
}

void qkshim_record_make(void) {
    void (*maker)(void) =
        __atomic_load_n((void (**)(void)) & qkshim_record_maker, __ATOMIC_ACQUIRE);
    if (maker != NULL) maker();
}

_Atomic uint64_t qkshim_fork_generation;

typedef struct {
    void (*prepare)(void);
    void (*parent)(void);
    void (*child)(void);
} qkshim_fork_hooks;

static qkshim_fork_hooks *_Atomic qkshim_fork_hooks_current;
/* The hooks the running fork's prepare step called (only the forking thread touches it). */
static qkshim_fork_hooks *qkshim_fork_hooks_in_use;

void qkshim_fork_hooks_set(void (*prepare)(void), void (*parent)(void), void (*child)(void)) {
    qkshim_fork_hooks *hooks = malloc(sizeof *hooks); /* set once per process: never freed */
    if (hooks == NULL) {
        fprintf(stderr, "QueueKit: out of memory installing the fork handlers\n");
        abort();
    }
    hooks->prepare = prepare;
    hooks->parent = parent;
    hooks->child = child;
    __atomic_store_n((qkshim_fork_hooks **)&qkshim_fork_hooks_current, hooks, __ATOMIC_RELEASE);
}

static void qkshim_fork_prepare(void) {
    qkshim_fork_hooks_in_use =
        __atomic_load_n((qkshim_fork_hooks **)&qkshim_fork_hooks_current, __ATOMIC_ACQUIRE);
    if (qkshim_fork_hooks_in_use != NULL) qkshim_fork_hooks_in_use->prepare();
}

static void qkshim_fork_parent(void) {
    if (qkshim_fork_hooks_in_use != NULL) qkshim_fork_hooks_in_use->parent();
}

static void qkshim_fork_child(void) {
    __atomic_add_fetch((uint64_t *)&qkshim_fork_generation, 1, __ATOMIC_ACQ_REL);
    qkshim_slow_paths_change(QKSHIM_SLOW_FORKED, true);
    if (qkshim_fork_hooks_in_use != NULL) qkshim_fork_hooks_in_use->child();
}

/* Installed at load, before any QueueKit object exists, so every fork of the process sees them. */
__attribute__((constructor)) static void qkshim_install_fork_handlers(void) {
    int rc = pthread_atfork(qkshim_fork_prepare, qkshim_fork_parent, qkshim_fork_child);
    if (rc != 0) {
        fprintf(stderr, "QueueKit: pthread_atfork failed (%d): a forked child could hang\n", rc);
        abort();
    }
}

int qkshim_thread_get_name(pthread_t thread, char *buffer, size_t size) {
    return pthread_getname_np(thread, buffer, size);
}

int qkshim_thread_set_name(const char *name) {
    char truncated[16];
    snprintf(truncated, sizeof truncated, "%s", name);
    return pthread_setname_np(pthread_self(), truncated);
}

uint64_t qkshim_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t qkshim_now_coarse_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

_Atomic long qkshim_waiting_threads;
_Atomic long qkshim_waiting_in_blocks;

static uint64_t qkshim_stall_env;

uint64_t qkshim_parse_stall_ms(const char *text, const char **error) {
    char *end;
    errno = 0;
    long long ms = strtoll(text, &end, 10);
    if (end == text || *end != '\0') {
        *error = "invalid";
    } else if (ms < 1 && errno == 0) {
        *error = "too small";
    } else if (ms > 3600000 || errno == ERANGE) {
        *error = ms < 0 ? "too small" : "too large";
    } else {
        *error = NULL;
    }
    return *error != NULL ? 0 : (uint64_t)ms * 1000000u;
}

/* Defined in Swift (StallWatch.swift): turns the watch on from qkshim_stall_env_ns(). */
void qkshim_stall_watch_from_environment(void);

static void qkshim_stall_env_start(void *context) {
    (void)context;
    qkshim_stall_watch_from_environment();
}

/* QUEUEKIT_STALL_MS, read once when the library is loaded. The Swift side is started from a
 * thread of its own, after the loader is done with this constructor. */
__attribute__((constructor)) static void qkshim_read_stall_env(void) {
    const char *text = getenv("QUEUEKIT_STALL_MS");
    if (text == NULL) return;
    const char *error = NULL;
    uint64_t ns = qkshim_parse_stall_ms(text, &error);
    if (error != NULL) {
        fprintf(stderr,
                "QueueKit: QUEUEKIT_STALL_MS=\"%s\" ignored: %s (expected milliseconds from 1 to "
                "3600000)\n",
                text, error);
        return;
    }
    qkshim_stall_env = ns;
    int rc = qkshim_thread_start(qkshim_stall_env_start, NULL, NULL);
    if (rc != 0)
        fprintf(stderr, "QueueKit: QUEUEKIT_STALL_MS ignored: cannot start a thread (%d)\n", rc);
}

uint64_t qkshim_stall_env_ns(void) {
    return qkshim_stall_env;
}

struct qkshim_thread_start_args {
    void (*body)(void *);
    void *context;
};

static void *qkshim_thread_main(void *argument) {
    struct qkshim_thread_start_args args = *(struct qkshim_thread_start_args *)argument;
    free(argument);
    args.body(args.context);
    return NULL;
}

int qkshim_thread_start(void (*body)(void *context), void *context, const char *name) {
    struct qkshim_thread_start_args *args = malloc(sizeof *args);
    if (args == NULL) return ENOMEM;
    args->body = body;
    args->context = context;
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    pthread_t thread;
    int rc = pthread_create(&thread, &attributes, qkshim_thread_main, args);
    pthread_attr_destroy(&attributes);
    if (rc != 0) {
        free(args);
        return rc;
    }
    if (name != NULL) pthread_setname_np(thread, name);
    return 0;
}

int qkshim_futex_wait(uint32_t *word, uint32_t expected, uint64_t deadline_ns) {
    struct timespec ts, *timeout = NULL;
    if (deadline_ns != UINT64_MAX) {
        ts.tv_sec = (time_t)(deadline_ns / 1000000000u);
        ts.tv_nsec = (long)(deadline_ns % 1000000000u);
        timeout = &ts;
    }
    /* FUTEX_WAIT_BITSET takes an absolute deadline on CLOCK_MONOTONIC (no FUTEX_CLOCK_REALTIME). */
    long rc = syscall(SYS_futex, word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, expected, timeout,
                      NULL, FUTEX_BITSET_MATCH_ANY);
    if (rc == 0) return 0;
    int error = errno;
    switch (error) {
    case EAGAIN:
        return 0; /* *word != expected already: the wake-up came first */
    case ETIMEDOUT:
        return ETIMEDOUT; /* the deadline passed */
    case EINTR:
        return EINTR; /* a signal interrupted the wait: spurious */
    default:
        /* EFAULT (word not mapped), EINVAL (misaligned word, bad timeout or operation), ENOSYS
         * (no futex in the kernel), or anything else: a bug, not a condition to wait out. */
        qkshim_fatal_errno("futex(FUTEX_WAIT_BITSET)", error);
    }
}

void qkshim_futex_wake(uint32_t *word, int count) {
    long rc = syscall(SYS_futex, word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, count, NULL, NULL, 0);
    /* FUTEX_WAKE returns the number woken; it fails only with EFAULT or EINVAL (a bad word). */
    if (rc < 0) qkshim_fatal_errno("futex(FUTEX_WAKE)", errno);
}

size_t qkshim_strlcpy(char *destination, const char *source, size_t size) {
    size_t length = strlen(source);
    if (size != 0) {
        size_t copied = length < size ? length : size - 1;
        memcpy(destination, source, copied);
        destination[copied] = '\0';
    }
    return length;
}

void qkshim_fatal(const char *message) {
    fprintf(stderr, "%s\n", message);
    fflush(stderr);
    /* The one line above is the whole report: keep the Swift runtime's crash handler (a page of
     * backtrace for what is the caller's bug, not a crash of ours) out of the way. */
    signal(SIGABRT, SIG_DFL);
    abort();
}

void qkshim_fatal_errno(const char *call, int error) {
    char message[160];
    snprintf(message, sizeof message, "QueueKit: %s failed: errno %d (%s)", call, error,
             strerror(error));
    qkshim_fatal(message);
}

#define QKSHIM_DESCRIPTION_CASE(code, description)                                                 \
    case code:                                                                                     \
        return description;
#define QKSHIM_NAME_CASE(code, description)                                                        \
    case code:                                                                                     \
        return #code;
#define QKSHIM_CODE_ITEM(code, description) code,

const char *qkshim_status_description(int status) {
    switch (status) {
    case 0:
        return "success";
        QK_STATUS_MAP(QKSHIM_DESCRIPTION_CASE)
    default:
        return "unknown QueueKit status";
    }
}

const char *qkshim_status_name(int status) {
    switch (status) {
        QK_STATUS_MAP(QKSHIM_NAME_CASE)
    default:
        return "";
    }
}

static const int qkshim_statuses[] = {QK_STATUS_MAP(QKSHIM_CODE_ITEM)};

int qkshim_status_count(void) {
    return (int)(sizeof qkshim_statuses / sizeof qkshim_statuses[0]);
}

int qkshim_status_at(int index) {
    return index >= 0 && index < qkshim_status_count() ? qkshim_statuses[index] : 0;
}
