/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * The platform seam of QueueKit: what Swift cannot express on Linux (initial-exec
 * thread-locals, the futex system call, atomics on plain words, the load-time constructor that
 * reads QUEUEKIT_STALL_MS and starts the stall watch, the fork handlers). Nothing here is
 * exported from libqueuekit.so (the version script keeps only qk_*).
 */
#ifndef QUEUEKIT_SHIM_H
#define QUEUEKIT_SHIM_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <pthread.h>

#define QKSHIM_TLS __attribute__((tls_model("initial-exec")))

/* The process-wide set-ups that take QueueKit's calls off their fast paths, a bit each in one
 * byte: ThreadSanitizer to inform (set when the library is loaded), the lock-order witness on
 * (set and cleared with its mode), a forked child (set by the fork's child handler, for good).
 * The flags themselves stay where their owners keep them, for the general paths; a fast path
 * that finds this byte 0 skips every check they call for with one load and one branch (SlowPaths
 * in SlowPaths.swift). Hidden, so that the load is one instruction. */
#define QKSHIM_SLOW_TSAN       1u
#define QKSHIM_SLOW_LOCK_ORDER 2u
#define QKSHIM_SLOW_FORKED     4u
extern _Atomic uint8_t qkshim_slow_paths __attribute__((visibility("hidden")));
static inline bool qkshim_slow_paths_off(void) {
    return __atomic_load_n((uint8_t *)&qkshim_slow_paths, __ATOMIC_RELAXED) == 0;
}
/* Sets or clears `bit`; each bit has one writer at a time (its owner's set-up). */
static inline void qkshim_slow_paths_change(uint8_t bit, bool on) {
    if (on) {
        __atomic_fetch_or((uint8_t *)&qkshim_slow_paths, bit, __ATOMIC_RELAXED);
    } else {
        __atomic_fetch_and((uint8_t *)&qkshim_slow_paths, (uint8_t)~bit, __ATOMIC_RELAXED);
    }
}

/* The innermost execution frame of the calling thread (see ExecutionFrame.swift), and the
 * condition lock whose test it runs (qkshim_testing_lock below): side by side, so that a fast
 * path that reads both finds them through one thread-local offset. */
typedef struct {
    void *frame;
    const void *testing;
} qkshim_tls_calls_t;
extern __thread qkshim_tls_calls_t qkshim_tls_calls QKSHIM_TLS;
/* A small, non-zero number naming the calling thread; 0 until first asked. */
extern __thread uint64_t qkshim_tls_thread_id QKSHIM_TLS;

static inline void *qkshim_frame_get(void) {
    return qkshim_tls_calls.frame;
}

/* The frame that stands for the main thread being on the main queue (set once, never freed),
 * and whether qk_main has handed the main thread over to dispatch. Plain globals: read on hot
 * paths, where a Swift lazy global would cost a swift_once call each time. */
extern void *_Atomic qkshim_main_frame;
extern _Atomic bool qkshim_main_released;
static inline void *qkshim_main_frame_get(void) {
    return __atomic_load_n((void **)&qkshim_main_frame, __ATOMIC_ACQUIRE);
}
static inline void qkshim_main_frame_set(void *frame) {
    __atomic_store_n((void **)&qkshim_main_frame, frame, __ATOMIC_RELEASE);
}
static inline bool qkshim_main_released_get(void) {
    return __atomic_load_n((bool *)&qkshim_main_released, __ATOMIC_ACQUIRE);
}
static inline void qkshim_main_released_set(void) {
    __atomic_store_n((bool *)&qkshim_main_released, true, __ATOMIC_RELEASE);
}
static inline void qkshim_frame_set(void *frame) {
    qkshim_tls_calls.frame = frame;
}

/* Assigns the calling thread its number (slow path of qkshim_thread_id). */
uint64_t qkshim_thread_id_assign(void);

/* A non-zero number unique to the calling thread among live threads. */
static inline uint64_t qkshim_thread_id(void) {
    uint64_t id = qkshim_tls_thread_id;
    return id != 0 ? id : qkshim_thread_id_assign();
}

/* 1 on the main thread, 2 elsewhere, 0 until first asked. */
extern __thread uint8_t qkshim_tls_thread_kind QKSHIM_TLS;

/* Works out whether the calling thread is the main thread (slow path of qkshim_is_main_thread). */
bool qkshim_is_main_thread_assign(void);

/* True on the process's main thread (the one whose tid is the pid); cached per thread. */
static inline bool qkshim_is_main_thread(void) {
    uint8_t kind = qkshim_tls_thread_kind;
    return kind != 0 ? kind == 1 : qkshim_is_main_thread_assign();
}

/* The calling thread's ThreadRecord (see ThreadRecord.swift), NULL until it is installed. */
extern __thread void *qkshim_tls_record QKSHIM_TLS;
static inline void *qkshim_record_get(void) {
    return qkshim_tls_record;
}

/* Installs `record` as the calling thread's record. When the thread exits (pthread_exit, return
 * from its start routine, or qk_main's hand-over of the main thread), `on_exit(record)` runs on
 * it, once, as a pthread key destructor. `on_exit` must be the same function on every call. */
void qkshim_record_install(void *record, void (*on_exit)(void *record));

/* How many condition locks the calling thread holds right now (ConditionLock.swift counts every
 * acquisition and release): the thread-exit hook looks for locks to abandon only when it is not 0,
 * and code that must not run while the thread holds a condition lock can ask. */
extern __thread uint32_t qkshim_tls_condlocks_held QKSHIM_TLS;
static inline uint32_t qkshim_condlocks_held(void) {
    return qkshim_tls_condlocks_held;
}
/* Makes the calling thread's record with the function that qkshim_record_maker_set installed
 * (the slow path of qkshim_condlock_acquired). */
void qkshim_record_make(void);
/* Installs the function that makes the calling thread's record (ThreadRecord.swift); set once,
 * before the first condition lock exists. */
void qkshim_record_maker_set(void (*maker)(void));

/* Counts one more held condition lock, and makes sure the thread has a record, so that its exit
 * runs the hook. All in C, so that the Swift fast path that calls it stays small enough to be
 * inlined into the C entry points. */
static inline void qkshim_condlock_acquired(void) {
    qkshim_tls_condlocks_held += 1;
    if (__builtin_expect(qkshim_tls_record == NULL, 0)) qkshim_record_make();
}
/* The calling thread's number when it has one and a record (then a condition lock it takes needs
 * no call to count it: qkshim_condlocks_held_increment), 0 otherwise. */
static inline uint64_t qkshim_thread_id_if_recorded(void) {
    return qkshim_tls_record != NULL ? qkshim_tls_thread_id : 0;
}
/* qkshim_condlock_acquired for a thread that has a record. */
static inline void qkshim_condlocks_held_increment(void) {
    qkshim_tls_condlocks_held += 1;
}
static inline void qkshim_condlocks_held_decrement(void) {
    qkshim_tls_condlocks_held -= 1;
}
static inline void qkshim_condlocks_held_reset(void) {
    qkshim_tls_condlocks_held = 0;
}

/* The condition lock whose test of its condition the calling thread is running right now (under
 * that lock's guard), NULL otherwise. While it is set, QueueKit calls made from the test refuse
 * (ConditionLock+Tests.swift, the C face's Handle). */
static inline const void *qkshim_testing_lock(void) {
    return qkshim_tls_calls.testing;
}
static inline void qkshim_testing_set(const void *lock) {
    qkshim_tls_calls.testing = lock;
}

/* The name of the symbol at or before `address` (dladdr), copied with strlcpy semantics into
 * `buffer`; the offset from it in `*offset`. 0 when dladdr found none (then nothing is written). */
size_t qkshim_symbol_name(const void *address, char *buffer, size_t size, size_t *offset);

/* fork(): how many forks lie between the process that loaded QueueKit and this one. 0 in the
 * original process; the child handler of fork adds one in each child (before the Swift child hook
 * runs), so a non-zero value means "a forked child, whose other threads are gone". The handlers
 * are installed when the library is loaded. */
extern _Atomic uint64_t qkshim_fork_generation;
static inline uint64_t qkshim_fork_generation_get(void) {
    return __atomic_load_n((uint64_t *)&qkshim_fork_generation, __ATOMIC_ACQUIRE);
}
static inline bool qkshim_is_forked_child(void) {
    return qkshim_fork_generation_get() != 0;
}

/* Sets the hooks that the fork handlers call: `prepare` in the forking thread before the fork,
 * then `parent` in the parent or `child` in the child. A fork that began before the hooks were
 * set calls none of them (each fork uses the hooks that its prepare step saw). */
void qkshim_fork_hooks_set(void (*prepare)(void), void (*parent)(void), void (*child)(void));

/* pthread_getname_np (a GNU extension Swift's Glibc module does not show): 0 or an errno. */
int qkshim_thread_get_name(pthread_t thread, char *buffer, size_t size);

/* pthread_setname_np on the calling thread (at most 15 bytes are kept): 0 or an errno. */
int qkshim_thread_set_name(const char *name);

/* Nanoseconds on CLOCK_MONOTONIC. */
uint64_t qkshim_now_ns(void);

/* Nanoseconds on CLOCK_MONOTONIC_COARSE: the same clock at tick resolution (a few ms), for a
 * fraction of the cost. How long a published wait has lasted is measured on it. */
uint64_t qkshim_now_coarse_ns(void);

/* How many threads have a wait published (see WaitRegistry.swift): an upper bound at every
 * instant. Incremented after a publication, decremented after its withdrawal, sequentially
 * consistent, so that of two threads publishing at once the later one sees the earlier. A plain
 * global: touched on the sync path, where a Swift lazy global would cost a swift_once call. */
extern _Atomic long qkshim_waiting_threads;
static inline long qkshim_waiting_enter(void) {
    return __atomic_fetch_add((long *)&qkshim_waiting_threads, 1, __ATOMIC_SEQ_CST);
}
static inline void qkshim_waiting_leave(void) {
    __atomic_fetch_sub((long *)&qkshim_waiting_threads, 1, __ATOMIC_SEQ_CST);
}

/* How many of those waits were published from inside a block (with a frame chain): only they can
 * hold a queue. Incremented before qkshim_waiting_enter, decremented after qkshim_waiting_leave. */
extern _Atomic long qkshim_waiting_in_blocks;
static inline void qkshim_waiting_in_block_enter(void) {
    __atomic_fetch_add((long *)&qkshim_waiting_in_blocks, 1, __ATOMIC_SEQ_CST);
}
static inline void qkshim_waiting_in_block_leave(void) {
    __atomic_fetch_sub((long *)&qkshim_waiting_in_blocks, 1, __ATOMIC_SEQ_CST);
}
static inline long qkshim_waiting_in_blocks_load(void) {
    return __atomic_load_n((long *)&qkshim_waiting_in_blocks, __ATOMIC_SEQ_CST);
}
/* In a forked child: no thread waits (the others are gone; the forking thread waits for nothing). */
static inline void qkshim_waiting_reset(void) {
    __atomic_store_n((long *)&qkshim_waiting_threads, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n((long *)&qkshim_waiting_in_blocks, 0, __ATOMIC_SEQ_CST);
}

/* The stall watch that QUEUEKIT_STALL_MS asks for: the threshold in nanoseconds read from the
 * environment when the library was loaded (0: not asked for, or not a number from 1 to
 * 3,600,000, which was reported on stderr). */
uint64_t qkshim_stall_env_ns(void);

/* Parses a QUEUEKIT_STALL_MS value, a decimal number of milliseconds from 1 to 3,600,000 (as
 * BSD's strtonum judges it): nanoseconds, or 0 with `*error` set to "invalid", "too small" or
 * "too large". */
uint64_t qkshim_parse_stall_ms(const char *text, const char **error);

/* Starts a detached thread running `body(context)`; 0 or the pthread_create error. */
int qkshim_thread_start(void (*body)(void *context), void *context, const char *name);

/* Waits while *word == expected, until woken or the absolute CLOCK_MONOTONIC deadline (UINT64_MAX:
 * none). Returns 0 when woken or the value differed, ETIMEDOUT at the deadline, EINTR spuriously;
 * any other failure (EFAULT, EINVAL, ENOSYS, ...) is a bug: it aborts naming the call and errno. */
int qkshim_futex_wait(uint32_t *word, uint32_t expected, uint64_t deadline_ns);

/* Wakes up to `count` threads waiting on `word`; aborts, naming the errno, if the call fails. */
void qkshim_futex_wake(uint32_t *word, int count);

/* The handle tag of the DB queue: the type metadata of the core's DBQueue class, by its Swift
 * symbol. The class is not generic, so its metadata is static, and its address is the first word
 * of every DBQueue object: a link-time constant here, where Swift outside the core reaches it by a
 * call of the metadata accessor. (A test checks that the two agree.) */
extern const char qkshim_dbqueue_metadata __asm__("$s8QueueKit7DBQueueCN");
static inline uintptr_t qkshim_dbqueue_tag(void) {
    return (uintptr_t)&qkshim_dbqueue_metadata;
}

/* The handle tag of the C condition lock (the metadata address of ConditionLock<Int>), stored by
 * every qk_condlock_create before it returns a handle, so 0 only while no handle exists: the handle
 * check of the condition lock's calls loads it instead of looking the generic type's metadata up. */
extern uintptr_t qkshim_condlock_tag_storage;
static inline uintptr_t qkshim_condlock_tag(void) {
    return __atomic_load_n(&qkshim_condlock_tag_storage, __ATOMIC_RELAXED);
}
static inline void qkshim_condlock_tag_set(uintptr_t tag) {
    __atomic_store_n(&qkshim_condlock_tag_storage, tag, __ATOMIC_RELAXED);
}

/* Atomic access to a futex word (sequentially consistent). */
static inline uint32_t qkshim_atomic_load32(uint32_t *word) {
    return __atomic_load_n(word, __ATOMIC_SEQ_CST);
}
static inline void qkshim_atomic_store32(uint32_t *word, uint32_t value) {
    __atomic_store_n(word, value, __ATOMIC_SEQ_CST);
}
static inline uint32_t qkshim_atomic_exchange32(uint32_t *word, uint32_t value) {
    return __atomic_exchange_n(word, value, __ATOMIC_SEQ_CST);
}

/* A DB queue's reader slots (DBQueue+ReaderSlots.swift): 64-bit words holding a reader's thread
 * number, sequentially consistent where the reader/revoker pairing needs it. */
static inline uint64_t qkshim_atomic_load64(uint64_t *word) {
    return __atomic_load_n(word, __ATOMIC_SEQ_CST);
}
static inline void qkshim_atomic_store64(uint64_t *word, uint64_t value) {
    __atomic_store_n(word, value, __ATOMIC_SEQ_CST);
}
/* Claims a slot that holds `empty` (no reader) for `value`: true when it held `empty`. */
static inline bool qkshim_slot_claim(uint64_t *slot, uint64_t empty, uint64_t value) {
    return __atomic_compare_exchange_n(slot, &empty, value, false, __ATOMIC_SEQ_CST,
                                       __ATOMIC_RELAXED);
}
/* Leaves `empty` in a slot (release), returning what it held. */
static inline uint64_t qkshim_slot_release(uint64_t *slot, uint64_t empty) {
    return __atomic_exchange_n(slot, empty, __ATOMIC_RELEASE);
}
/* Replaces *expected with desired if the slot holds *expected; otherwise loads it into *expected. */
static inline bool qkshim_slot_replace(uint64_t *slot, uint64_t *expected, uint64_t desired) {
    return __atomic_compare_exchange_n(slot, expected, desired, false, __ATOMIC_SEQ_CST,
                                       __ATOMIC_ACQUIRE);
}

/* A CPU hint for spin loops. */
static inline void qkshim_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* BSD's strlcpy: copies at most size - 1 bytes of `source` and a terminating NUL (nothing when
 * `size` is 0) and returns strlen(source). Its own name, not `strlcpy`: the static libdispatch
 * linked into libqueuekit.so defines an unrelated global `strlcpy` (returning strlen(dst) +
 * strlen(src) + 1) that a plain reference would bind to; and the library needs no libbsd. */
size_t qkshim_strlcpy(char *destination, const char *source, size_t size);

/* ThreadSanitizer: in a program built with -fsanitize=thread, the sanitizer's runtime defines its
 * annotation interface (tsan_interface.h and the dynamic annotations), which this library
 * references weakly (shim.c). qkshim_tsan_mode, set once when the library is loaded, says what
 * ThreadSanitizer.swift does, when the runtime is present and this library itself is not
 * instrumented (SwiftPM's --sanitize=thread build is, and needs neither): QKSHIM_TSAN_ANNOTATE,
 * tell it about QueueKit's hand-offs, which it cannot see in an uninstrumented library, and
 * QKSHIM_TSAN_HIDE_INTERNALS, keep the library's own memory accesses out of the reports. 0
 * otherwise: each check is then one load and one predictable branch. The functions below do the
 * work, out of line. */
#define QKSHIM_TSAN_ANNOTATE       1u
#define QKSHIM_TSAN_HIDE_INTERNALS 2u
/* Read-only to everything but shim.c's load-time initialiser (which writes it through its own
 * declaration, before any thread can run QueueKit): const here, so Swift reads it directly. */
extern const uint8_t qkshim_tsan_mode __asm__("qkshim_tsan_mode_storage")
    __attribute__((visibility("hidden")));

#define QKSHIM_TSAN_READ_LOCK (1u << 3) /* __tsan_mutex_read_lock: shared access */
#define QKSHIM_TSAN_TRY_LOCK  (1u << 4) /* __tsan_mutex_try_lock: could not have blocked */

/* The calling thread now holds `object` as a mutex (shared with QKSHIM_TSAN_READ_LOCK). */
void qkshim_tsan_locked(const void *object, unsigned flags);
/* The calling thread is about to give up `object` (flags as when it locked it). */
void qkshim_tsan_unlocking(const void *object, unsigned flags);

/* The same for the condition lock's fast paths, check included: to the Swift optimiser one call
 * (which keeps the code around it small enough to inline), to the C compiler a test and a
 * branch. */
static inline void qkshim_tsan_condlock_locked(const void *lock) {
    if (__builtin_expect(qkshim_tsan_mode & QKSHIM_TSAN_ANNOTATE, 0))
        qkshim_tsan_locked(lock, QKSHIM_TSAN_TRY_LOCK);
}
static inline void qkshim_tsan_condlock_unlocking(const void *lock) {
    if (__builtin_expect(qkshim_tsan_mode & QKSHIM_TSAN_ANNOTATE, 0))
        qkshim_tsan_unlocking(lock, 0);
}
/* A one-way hand-off through `token`: what the releasing thread did happens before what the
 * acquiring thread does after. */
void qkshim_tsan_release(const void *token);
void qkshim_tsan_acquire(const void *token);

/* Entering and leaving QueueKit's own code behind a C API call (nests): until the matching end,
 * the thread's memory accesses through intercepted functions (malloc, free, memcpy, bcmp: the
 * Swift runtime's metadata cache, dispatch's block copies, allocations another thread frees
 * after a hand-off made inside dispatch) are not recorded: they are the library's business,
 * ordered by synchronisation the sanitizer cannot see. The process's first begin instantiates the
 * Swift metadata of QueueKit's generic types (MetadataWarmUp.swift) while other callers wait. */
void qkshim_tsan_internal_begin(void);
void qkshim_tsan_internal_end(void);
/* Runs a thread-exit hook of QueueKit's with all of it hidden from ThreadSanitizer (as above). */
void qkshim_run_exit_hook(void (*hook)(void *), void *argument);
/* Around user code run from inside QueueKit's own code, whose accesses are recorded: begin
 * returns the depth of the internal code it interrupts, end restores it. */
unsigned qkshim_tsan_user_code_begin(void);
void qkshim_tsan_user_code_end(unsigned depth);

/* The texts of include/queuekit.h's status list (QK_STATUS_MAP), compiled here because Swift
 * cannot expand a function-like macro: "success" / the description / "unknown QueueKit status",
 * and the errno's name ("EDEADLK", "" when not listed). Static strings. */
const char *qkshim_status_description(int status);
const char *qkshim_status_name(int status);

/* The listed statuses in order, for checks that walk the list: the number of them, and the
 * `index`th (0 when out of range). */
int qkshim_status_count(void);
int qkshim_status_at(int index);

/* Prints one line to stderr and aborts: the *_precondition failure path. */
__attribute__((noreturn)) void qkshim_fatal(const char *message);

/* As qkshim_fatal, for a system call that failed in a way that can only be a bug: one line naming
 * the call, the errno value and its text. */
__attribute__((noreturn)) void qkshim_fatal_errno(const char *call, int error);

/* ---- libdispatch's round trips without blocks (dispatch.c) ---------------------------------- */

/* dispatch_sync_f, or dispatch_barrier_sync_f when `barrier`, of `work(context)` onto the dispatch
 * queue `queue` (a dispatch_queue_t): a context on the caller's stack, no block, no allocation. */
void qkshim_dispatch_sync(void *queue, bool barrier, void *context, void (*work)(void *context));
/* dispatch_async_f, or dispatch_barrier_async_f when `barrier`. */
void qkshim_dispatch_async(void *queue, bool barrier, void *context, void (*work)(void *context));
/* dispatch_get_current_queue(): the dispatch queue whose block runs (used once, to confirm where
 * the Swift overlay keeps a DispatchQueue's dispatch_queue_t). */
void *qkshim_dispatch_current_queue(void);

#endif
