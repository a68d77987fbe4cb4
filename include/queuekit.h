/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * queuekit.h — the C interface of QueueKit.
 *
 * QueueKit makes three GCD-era concurrency patterns safe and fast on Linux:
 *
 *   1. a queue-identity registry ("which queue am I on?", and checks that say so),
 *   2. a reentrant DB queue (many readers, one writer, nested calls never deadlock),
 *   3. a condition lock (NSConditionLock semantics without its crashes, herds and races),
 *
 * and refuses, with EDEADLK and a report, the deadlocks threads make with each other across all
 * three (section 4).
 *
 * This header is the reference manual: every declaration is documented right above it.
 *
 * Conventions
 * -----------
 * - Every function that can fail returns `int`: 0 on success, otherwise a positive errno value
 *   from <errno.h>, as pthreads do. Constructors return a pointer, or NULL with errno set.
 *   QK_STATUS_MAP below lists every such value with its meaning; qk_strerror describes a status
 *   and qk_status_name names it ("EDEADLK").
 * - Misuse never crashes and never corrupts: a bad argument gets an error code. The only calls
 *   that abort are the ones named *_precondition; they print one line saying what was expected.
 * - Handles carry a type tag: passing a handle of another QueueKit type is EINVAL. A handle that
 *   was destroyed or released to zero must not be used again: the library detects that on a
 *   best-effort basis only (the memory may be reused), so the behaviour is undefined.
 * - Work is passed as (void *context, qk_function_t work), like dispatch_async_f.
 * - Times are uint64_t nanoseconds on CLOCK_MONOTONIC (qk_now_ns()); deadlines are absolute and
 *   QK_FOREVER never expires. Wall-clock jumps never shorten or lengthen a wait.
 * - Strings the library returns stay valid as long as their object; strings it copies out use
 *   strlcpy semantics (the full length is returned, the copy is truncated to the buffer).
 * - All functions are thread-safe.
 *
 * Threads that die and processes that fork
 * ----------------------------------------
 * - A thread that exits holding a condition lock (returning from its start routine, pthread_exit,
 *   cancellation) abandons it, as a robust pthread mutex is abandoned: the lock goes to the next
 *   waiter that its condition satisfies, or stays free. The lock* or trylock* call that acquires
 *   it next returns EOWNERDEAD instead of 0 and holds the lock; the condition is as the dead owner
 *   left it (the data it guards may be half-updated: repair it, then unlock as usual). A
 *   lock_when for another value keeps waiting. qk_condlock_set on an abandoned lock returns 0 and
 *   leaves the EOWNERDEAD for the next acquirer. qk_main() ends the main thread as pthread_exit
 *   does: the condition locks it holds are abandoned.
 * - A thread must not exit inside a block of a queue or a DB queue (a work function that calls
 *   pthread_exit, or a thread cancelled there): the queue stays held forever.
 * - fork() without exec: in the child, only the forking thread exists; dispatch's threads are gone.
 *   What works in the child:
 *     condition locks: every call; locks that other threads held at the fork are abandoned
 *       (EOWNERDEAD for the next acquirer), their waiters are gone;
 *     DB queues: qk_dbqueue_read, write, flush, destroy, queue -- except on a DB queue that was
 *       being written (a write's work function running on another thread), or had
 *       qk_dbqueue_write_async writes pending, at the fork: there they return ENOTRECOVERABLE
 *       (destroy frees it), and the writes pending at the fork never run in the child. A queue
 *       whose writes had all run (flush returned) stays usable even if its worker thread was
 *       still finishing, and so does one that other threads were only waiting for;
 *     the stall watch, when on at the fork: it keeps watching in the child (on a new
 *       "queuekit-stalls" thread there), and qk_set_stall_handler works;
 *     identity calls: qk_queue_current, is_current, copy_current_label, check, precondition,
 *       label, the specifics getters, and qk_queue_set_specific (a replaced value's destructor
 *       runs on the calling thread there);
 *     the version, qk_strerror, qk_now_ns.
 *   What does not: every qk_queue_* submission (async, sync, barrier_async, barrier_sync,
 *   perform) and qk_dbqueue_write_async return ENOTRECOVERABLE at once and run nothing;
 *   qk_main() aborts with one line on stderr. Nothing waits forever; the parent is unaffected.
 *
 * Loading the library
 * -------------------
 * - libqueuekit.so.0 needs only glibc (libc, libm, the dynamic loader; glibc 2.36 or later when
 *   it was built against one, for its packed relocations). The Swift runtime, libdispatch,
 *   libstdc++ and the unwinder are linked in, and none of their symbols is visible: the library
 *   exports exactly the qk_* functions of this header.
 * - Loading it runs the initializers of the Swift runtime, libdispatch and QueueKit (it registers
 *   pthread_atfork handlers and reads QUEUEKIT_STALL_MS); it starts no thread and installs no
 *   signal handler, unless QUEUEKIT_STALL_MS is set.
 * - Threads it may start: libdispatch's worker threads, on demand, for the blocks of queues and
 *   DB queues (idle ones end by themselves after a while), and "queuekit-stalls" while a stall
 *   watch is on (qk_set_stall_handler, QUEUEKIT_STALL_MS).
 * - It stays resident: dlclose does not unmap it (it is linked with -z nodelete), because
 *   libdispatch cannot stop its worker threads and every thread that called QueueKit keeps a
 *   thread-exit destructor pointing into it. So a plugin that uses QueueKit and is unloaded
 *   itself must first let its queued work finish (qk_dbqueue_flush, a last qk_queue_sync or
 *   barrier) and reset the handlers it installed (qk_set_deadlock_handler(NULL, NULL),
 *   qk_set_stall_handler(0, NULL, NULL)): work and handlers that point into unloaded code are
 *   the caller's bug, not something QueueKit can detect.
 * - Thread-local storage: the hot paths use initial-exec thread-locals (a TLS descriptor or
 *   __tls_get_addr call would double their cost), so the library is marked STATIC_TLS. Its
 *   static TLS block is at most 256 bytes. Loaded when the program starts, that costs nothing;
 *   loaded later by dlopen (a plugin, Python's ctypes), the block comes out of the surplus glibc
 *   reserves for such libraries (about 1.7 KB in a fresh process with the default tunables), and
 *   dlopen fails with "cannot allocate memory in static TLS block" only if other libraries have
 *   left less than 256 bytes of it. GLIBC_TUNABLES=glibc.rtld.optional_static_tls=BYTES enlarges
 *   the surplus for such programs.
 */
#ifndef QUEUEKIT_H
#define QUEUEKIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) || defined(__clang__)
#define QK_EXPORT   __attribute__((visibility("default")))
#define QK_NORETURN __attribute__((noreturn))
#else
#define QK_EXPORT
#define QK_NORETURN
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ========================================================================================== */
/* Version                                                                                    */
/* ========================================================================================== */

/** Major version of this header: incompatible API changes. */
#define QK_VERSION_MAJOR 0
/** Minor version of this header: compatible additions. */
#define QK_VERSION_MINOR 2
/** Patch version of this header: fixes. */
#define QK_VERSION_PATCH 0
/** The version as one number: major*10000 + minor*100 + patch. */
#define QK_VERSION_NUMBER (QK_VERSION_MAJOR * 10000 + QK_VERSION_MINOR * 100 + QK_VERSION_PATCH)

/** The version of the library actually loaded, as "major.minor.patch"; static, never NULL. */
QK_EXPORT const char *qk_version(void);

/** The version of the library actually loaded, as QK_VERSION_NUMBER computes it. Compare with
 *  QK_VERSION_NUMBER to detect a header/library mismatch. */
QK_EXPORT int qk_version_number(void);

/* ========================================================================================== */
/* Common types, status and time                                                              */
/* ========================================================================================== */

/** A unit of work: called with the context pointer given alongside it. */
typedef void (*qk_function_t)(void *context);

/** A deadline that never expires. */
#define QK_FOREVER 0xFFFFFFFFFFFFFFFFull /* == UINT64_MAX */

/** Every non-zero status a QueueKit function returns, one `XX(code, description)` per status:
 *  `code` is the <errno.h> constant, `description` what it means from QueueKit. This one list
 *  produces qk_strerror, qk_status_name and the manual's table of statuses (EOWNERDEAD and
 *  ENOTRECOVERABLE: see "Threads that die and processes that fork" above); the tests check the
 *  Swift QueueKitError constants against it. Expand it with a macro of your own, after
 *  including <errno.h>:
 *
 *      #define NAME_CASE(code, description) case code: return #code;
 *      switch (status) { QK_STATUS_MAP(NAME_CASE) default: return "?"; }
 */
#define QK_STATUS_MAP(XX)                                                                          \
    XX(EINVAL, "invalid argument: a NULL or wrong-type handle, a NULL function or key, "           \
               "or an out-of-range enum value")                                                    \
    XX(EBUSY, "busy: a try-variant could not acquire without waiting, "                            \
              "or the object is in use")                                                           \
    XX(ETIMEDOUT, "timed out: the deadline passed first")                                          \
    XX(EPERM, "not permitted: the calling thread does not hold the lock, "                         \
              "or the check failed")                                                               \
    XX(EDEADLK, "would deadlock: the call did nothing and the work was not run")                   \
    XX(EOWNERDEAD, "owner died: the lock is held now, but its previous owner exited holding it")   \
    XX(ENOTRECOVERABLE, "not recoverable: in a forked child, the call needs threads "              \
                        "the child does not have")                                                 \
    XX(ENOMEM, "out of memory")

/** A static, never-NULL English description of a status returned by any QueueKit function:
 *  "success" for 0, the description of QK_STATUS_MAP for its values, a generic text for
 *  anything else. */
QK_EXPORT const char *qk_strerror(int status);

/** The symbolic name of a status of QK_STATUS_MAP, for logs: "EDEADLK" for EDEADLK. "" for 0
 *  and for anything not in the list. Static, never NULL. */
QK_EXPORT const char *qk_status_name(int status);

/** Nanoseconds on CLOCK_MONOTONIC: the clock every QueueKit deadline is measured on.
 *  A deadline for "500 ms from now" is qk_now_ns() + 500000000. */
QK_EXPORT uint64_t qk_now_ns(void);

/* ========================================================================================== */
/* 1. Queue-identity registry                                                                 */
/* ========================================================================================== */

/** An opaque, reference-counted dispatch queue that knows its identity. */
typedef struct qk_queue qk_queue_t;

/** How a created queue runs its blocks. */
typedef enum {
    QK_QUEUE_SERIAL = 0,    /**< one block at a time, in submission order */
    QK_QUEUE_CONCURRENT = 1 /**< many blocks at once; barrier blocks run alone */
} qk_queue_kind_t;

/** Quality-of-service classes of the global queues, lowest first. */
typedef enum {
    QK_QOS_BACKGROUND = 0,
    QK_QOS_UTILITY = 1,
    QK_QOS_DEFAULT = 2,
    QK_QOS_USER_INITIATED = 3,
    QK_QOS_USER_INTERACTIVE = 4
} qk_qos_t;

/** What qk_queue_check and qk_queue_precondition verify about the calling thread. */
typedef enum {
    QK_ON_QUEUE = 0,            /**< the thread runs a block of the queue, here or further out */
    QK_ON_QUEUE_AS_BARRIER = 1, /**< ... and runs it exclusively (serial queue or barrier) */
    QK_NOT_ON_QUEUE = 2         /**< the thread does not run a block of the queue at all */
} qk_predicate_t;

/** Creates a queue. `label` may be NULL (the queue is then anonymous, its label ""); it is
 *  copied. The queue is registered: the identity calls below know it with no extra step.
 *  Returns a handle holding one reference (release it with qk_queue_release), or NULL with
 *  errno EINVAL (bad kind) or ENOMEM. */
QK_EXPORT qk_queue_t *qk_queue_create(const char *label, qk_queue_kind_t kind);

/** Creates a queue whose blocks run on `target` (dispatch's target-queue hierarchy). Inside its
 *  blocks qk_queue_current() is the new queue, and qk_queue_is_current(target) holds. A NULL
 *  target is the same as qk_queue_create. The new queue keeps `target` alive.
 *  Returns NULL with errno EINVAL for a bad kind, a wrong-type target or an identity-only target
 *  (see qk_dbqueue_queue); ENOMEM. */
QK_EXPORT qk_queue_t *qk_queue_create_with_target(const char *label, qk_queue_kind_t kind,
                                                  qk_queue_t *target);

/** The main queue (serial). Never freed. Its blocks run one at a time once qk_main() has been
 *  called (on Linux, dispatch then drains it on a worker thread, not on the main thread itself).
 *  On the main thread outside any block, before qk_main(), the main queue is current. */
QK_EXPORT qk_queue_t *qk_queue_main(void);

/** The global concurrent queue of a QoS class. Never freed; its label is non-empty
 *  (e.g. "com.apple.root.default-qos"). Returns NULL with errno EINVAL for a bad class. */
QK_EXPORT qk_queue_t *qk_queue_global(qk_qos_t qos);

/** Adds a reference and returns `queue` (NULL stays NULL). A no-op on main and global queues. */
QK_EXPORT qk_queue_t *qk_queue_retain(qk_queue_t *queue);

/** Drops a reference; the queue is freed when the last reference is gone and its submitted
 *  blocks have run (pending blocks keep it alive, and a block running in a qk_queue_sync,
 *  barrier_sync or perform may release the last reference itself). NULL, wrong-type handles,
 *  the main and global queues are no-ops. */
QK_EXPORT void qk_queue_release(qk_queue_t *queue);

/** The queue's label; never NULL ("" when anonymous, "" for a NULL or wrong-type handle).
 *  Valid as long as the queue. */
QK_EXPORT const char *qk_queue_label(const qk_queue_t *queue);

/* How the round trips reach the queue, and why each path keeps every rule below.
 *
 * - qk_queue_sync, qk_queue_barrier_sync, qk_queue_perform first decide, from the calling
 *   thread's own frames (what it runs here and further out, through sync hops), whether the call
 *   is refused (EDEADLK: sync onto a queue it holds exclusively, barrier_sync onto a queue it
 *   runs, the target cases), runs inline (perform on a queue the thread is on; sync onto a
 *   concurrent queue whose non-barrier block it runs) or reaches the queue: on the idle path
 *   when the queue is idle, otherwise through dispatch. None of this touches shared memory: it
 *   is the same check, with the same answers, on every path.
 * - Inline: `work` runs on the calling thread in a new frame of `queue` (qk_queue_current()
 *   is `queue` inside), holding it as the thread holds it already. Nothing is waited for, so
 *   nothing is published; the thread held `queue` before the call and still does.
 * - Idle: a call onto a created queue with no target, which no queue targets, and of which
 *   nothing runs or is pending (no block submitted to dispatch unfinished, no other thread
 *   holding it in a way that conflicts: any holder for a serial queue or a barrier, an exclusive
 *   one for a plain sync onto a concurrent queue), takes the queue with one compare-and-swap on
 *   a word QueueKit owns, as dispatch_sync takes an idle queue, and runs `work` on the calling
 *   thread in a new frame of `queue`, telling ThreadSanitizer the queue is held, then gives the
 *   queue back. The thread does not wait, so nothing is published for the detector. Why the
 *   rules still hold: every block QueueKit hands dispatch for the queue (async, barrier_async,
 *   a sync through dispatch, an actor's job) is counted in that word before it is submitted and
 *   until it has finished, so an idle call never overtakes a block submitted before it, queued
 *   or running, and takes the dispatch route instead; a block that dispatch starts while a thread
 *   holds the queue this way first waits for that holder to leave (a plain block of a concurrent
 *   queue only for an exclusive holder), so no block ever overlaps one the queue forbids it to;
 *   a queue created to target a queue closes that queue's idle path for good, and its blocks
 *   wait, on their way in, for the holders of the queues they target. The holder runs inside
 *   a frame of `queue`, where section 4's detector finds every holder, and the word names it
 *   (its thread number) while it holds the queue alone; the lock-order witness (section 4)
 *   records the call's edges as for any call that may wait. qk_queue_current(), the
 *   checks, the refusals above and in a forked child are the same on every path. The queue's
 *   blocks are those submitted through QueueKit. Its dispatch queue, handed out in Swift by
 *   DispatchQueue.current inside a block, closes the idle path for good when it is handed out
 *   (dispatch then orders what is given to it directly), except against the one call that
 *   holds the queue on the idle path at that moment.
 * - Through dispatch, otherwise: the wait is published for the cross-thread detector exactly as
 *   described in section 4 (and refused there when it would close a cycle, before dispatch sees
 *   it), then the call is dispatch_sync_f or dispatch_barrier_sync_f itself, with a context on
 *   the calling thread's stack: no block, no allocation. It waits behind the blocks submitted
 *   before it, as dispatch orders them, so exclusivity (serial queues, barriers) and the order
 *   after earlier qk_queue_async blocks are dispatch's own. The work's wrapper waits for idle
 *   holders as above, then withdraws the wait, pushes the frame that makes qk_queue_current() and
 *   qk_queue_check answer for `queue` (and hands the caller's frames on, so a sync onto the main
 *   queue still holds what its caller holds) and tells ThreadSanitizer the queue is held
 *   (exclusively on a serial queue or for a barrier, shared otherwise).
 * - On either path the queue is kept alive until the bookkeeping after `work` is done, even when
 *   `work` releases the last reference to it: a call through dispatch holds a reference of its
 *   own; on the idle path, qk_queue_release of the queue (or of a queue that targets it) inside
 *   `work`, or inside a block of a sync that `work` makes (on any thread, a main-queue block's
 *   included), takes effect when the call has given the queue back.
 * - qk_queue_async and qk_queue_barrier_async hand dispatch_async_f / dispatch_barrier_async_f
 *   a small node holding `work`, `context`, and a reference to the queue (given up after the
 *   block ran); the queue recycles its nodes (the block gives its node back once it ran; the
 *   nodes are freed with the queue), so a steady stream allocates nothing once the queue has as
 *   many nodes as blocks were ever pending at once; the node carries ThreadSanitizer's hand-off
 *   from the submitting thread to the block. A sync queued behind such a barrier is seen waiting
 *   for the queue's running blocks (section 4).
 * - In a forked child every one of these calls returns ENOTRECOVERABLE before anything else.
 */

/** Submits `work(context)` to run on `queue` later; returns at once.
 *  EINVAL: NULL/wrong-type queue, NULL work, identity-only queue. ENOMEM: no memory for the
 *  submission's node (nothing submitted). ENOTRECOVERABLE (nothing run) in a forked child, as
 *  every submission below (see "Threads that die and processes that fork"). */
QK_EXPORT int qk_queue_async(qk_queue_t *queue, void *context, qk_function_t work);

/** Runs `work(context)` on `queue` and waits for it, keeping dispatch's ordering.
 *  Where dispatch would crash or hang because of what the calling thread already runs (here or
 *  further out, through sync hops), returns EDEADLK without running `work`: when the thread
 *  holds `queue` exclusively (a block of a serial queue, a barrier block of a concurrent one, the
 *  main queue on the main thread); when it holds exclusively a queue that `queue` targets; and
 *  when it runs a non-barrier block of a concurrent queue that `queue` targets, other than a
 *  global queue (dispatch would queue `work` there behind any pending barrier, which waits for
 *  the thread itself; global queues have no barriers); also EDEADLK when its wait would close a
 *  cycle of waiting threads (section 4).
 *  On a concurrent queue whose non-barrier block the thread already runs (directly or through a
 *  queue that targets it), `work` runs inline at once: it can never wait behind a pending barrier.
 *  EINVAL: NULL/wrong-type queue, NULL work, identity-only queue. ENOTRECOVERABLE (nothing run)
 *  in a forked child. */
QK_EXPORT int qk_queue_sync(qk_queue_t *queue, void *context, qk_function_t work);

/** Submits `work(context)` as a barrier: on a concurrent queue it runs alone, after the blocks
 *  submitted before it; on a serial queue, and on the global queues (which, as in dispatch, do
 *  not honour barriers), it is the same as qk_queue_async. Returns at once.
 *  EINVAL, ENOMEM and ENOTRECOVERABLE: as qk_queue_async. */
QK_EXPORT int qk_queue_barrier_async(qk_queue_t *queue, void *context, qk_function_t work);

/** Runs `work(context)` as a barrier on `queue` and waits for it (on a global queue: as
 *  qk_queue_sync). Returns EDEADLK without running `work` when the calling thread runs any block
 *  of `queue` (here or further out), in the target cases of qk_queue_sync, and when its wait would
 *  close a cycle of waiting threads (section 4). EINVAL and ENOTRECOVERABLE: as qk_queue_async. */
QK_EXPORT int qk_queue_barrier_sync(qk_queue_t *queue, void *context, qk_function_t work);

/** Runs `work(context)` on `queue` now, the safe way: inline when the calling thread is already
 *  on `queue` (whenever qk_queue_check(queue, QK_ON_QUEUE) holds, so also when `queue` is held
 *  further out by a waiting sync), otherwise exactly as qk_queue_sync (including its EDEADLK for
 *  a queue that `queue` targets, and when its wait would close a cycle of waiting threads). It
 *  never deadlocks on `queue` itself. EINVAL and ENOTRECOVERABLE (also inline): as qk_queue_async. */
QK_EXPORT int qk_queue_perform(qk_queue_t *queue, void *context, qk_function_t work);

/** The innermost queue whose block the calling thread is running, through any of the calls
 *  above, inline or not (inside a queue that targets another, the inner one). On the main
 *  thread outside any block: qk_queue_main(). Elsewhere outside any block: NULL.
 *  A borrowed pointer: valid while the block runs; retain it to keep it. */
QK_EXPORT qk_queue_t *qk_queue_current(void);

/** True when `queue` is the current queue or one of its targets. False for NULL. */
QK_EXPORT bool qk_queue_is_current(const qk_queue_t *queue);

/** Copies the current queue's label into `buffer` (strlcpy semantics: always NUL-terminated
 *  when size > 0) and returns the label's full length. Outside any queue the label is "".
 *  `buffer` may be NULL when `size` is 0, to measure. */
QK_EXPORT size_t qk_queue_copy_current_label(char *buffer, size_t size);

/** Verifies a predicate about the calling thread, as dispatch_assert_queue does: QK_ON_QUEUE
 *  also holds when `queue` is held further out, by a block waiting in a sync on another queue.
 *  Returns 0 when it holds, EPERM when not, EINVAL for a NULL/wrong-type queue or bad predicate. */
QK_EXPORT int qk_queue_check(const qk_queue_t *queue, qk_predicate_t predicate);

/** As qk_queue_check, but aborts the process when the predicate does not hold (or an argument
 *  is invalid), after printing one line to stderr naming the expected and the current queue. */
QK_EXPORT void qk_queue_precondition(const qk_queue_t *queue, qk_predicate_t predicate);

/** Associates `value` with `key` on `queue`, as dispatch_queue_set_specific does. Setting NULL
 *  removes it. When a value is replaced or removed, or the queue is freed, its `destructor`
 *  (may be NULL) is called with the old value, possibly asynchronously on another thread.
 *  EINVAL: NULL/wrong-type queue, NULL key. */
QK_EXPORT int qk_queue_set_specific(qk_queue_t *queue, const void *key, void *value,
                                    qk_function_t destructor);

/** The value for `key` on `queue` itself (targets are not consulted); NULL when none, or for a
 *  NULL queue or key. */
QK_EXPORT void *qk_queue_get_specific(const qk_queue_t *queue, const void *key);

/** The value for `key` on the current queue, else on its targets in order, as
 *  dispatch_get_specific does (the queues of sync callers further out are not consulted).
 *  NULL when none, outside any queue (except on the main thread: the main queue), or for NULL. */
QK_EXPORT void *qk_get_specific(const void *key);

/** Hands the process over to dispatch to run the main queue (dispatch_main); never returns. Call
 *  it on the main thread. Afterwards the main thread no longer counts as being on the main queue
 *  outside its blocks; main-queue blocks run one at a time (on Linux, on a worker thread). The
 *  main thread ends as with pthread_exit: the condition locks it holds are abandoned (EOWNERDEAD
 *  for their next acquirer). In a forked child it aborts with one line on stderr. */
QK_EXPORT QK_NORETURN void qk_main(void);

/* ========================================================================================== */
/* 2. Reentrant DB queue                                                                      */
/* ========================================================================================== */

/** An opaque reader/writer queue: many concurrent readers, one writer at a time, writes in FIFO
 *  order, and nested calls in any order never deadlock.
 *
 *  Ordering is what a program can observe. A call that begins after another call returned, or
 *  after a qk_dbqueue_write_async returned, is ordered after it: a read sees it, a write runs after
 *  it. Asynchronous writes run one at a time in submission order; nothing overtakes a submitted
 *  one. Synchronous calls in flight at the same moment on different threads have no order, so a
 *  running thread takes a free queue at once (a reader next to other readers, a writer into an
 *  idle queue) ahead of threads parked waiting: the queue is not reserved for a thread that still
 *  has to be scheduled. A thread spins briefly before it parks.
 *
 *  Fairness bound: a thread parked for 1 ms becomes due. From then on nobody enters ahead of it
 *  and the queue is handed to it as soon as it is free (a due writer waits only for the readers
 *  already inside; due readers are let in together). Writers do not starve under a storm of
 *  readers, nor readers under a storm of writers.
 *
 *  Where qk_dbqueue_write_async's work runs: on a worker thread of the queue, or on a thread that
 *  has to wait for it anyway. A qk_dbqueue_read, qk_dbqueue_write, qk_dbqueue_flush or
 *  qk_dbqueue_destroy that must wait for pending asynchronous writes runs the ones submitted
 *  before its call began itself (as dispatch_sync runs blocks on its caller's thread) when its
 *  thread holds nothing else of QueueKit's: no block of any queue or DB queue (also further out)
 *  and no condition lock; the main thread before qk_main() never does. Inside such work, as on the
 *  worker, qk_queue_current() is the DB queue's queue and nothing further out. Otherwise the call
 *  waits for the worker. A worker that ran out of writes keeps polling for a few milliseconds, so
 *  a write nobody waits for may start up to about 1 ms after it was submitted. */
typedef struct qk_dbqueue qk_dbqueue_t;

/** Creates a DB queue; `label` may be NULL (it is copied). NULL with errno ENOMEM when the label
 *  cannot be copied. */
QK_EXPORT qk_dbqueue_t *qk_dbqueue_create(const char *label);

/** Waits for blocks running on other threads, runs every write already submitted (nothing is
 *  lost), then frees the queue. EBUSY (nothing done) when called inside a block of this queue;
 *  EINVAL for NULL/wrong type. Using the handle after destroy began is the caller's bug. In a
 *  forked child, a queue that was being written or had writes pending at the fork is freed
 *  without running them. EDEADLK (nothing done, the queue stays usable) when waiting for those
 *  blocks would close a cycle of waiting threads (section 4). */
QK_EXPORT int qk_dbqueue_destroy(qk_dbqueue_t *db);

/** Runs `work(context)` now, concurrently with other reads and never with a write. A read that is
 *  not nested in a block of this queue sees every write submitted before the call began. Inside a
 *  read or write of this queue (also through sync hops via other queues) it runs inline.
 *  EINVAL: NULL/wrong-type db, NULL work. ENOTRECOVERABLE (nothing run) in a forked child on a
 *  queue that was being written or had writes pending at the fork, as write and flush. EDEADLK
 *  (nothing run) when it would have to wait behind a write and that wait would close a cycle of
 *  waiting threads (section 4). */
QK_EXPORT int qk_dbqueue_read(qk_dbqueue_t *db, void *context, qk_function_t work);

/** Runs `work(context)` now, exclusively; a write that is not nested runs after every write
 *  submitted before it. Inside a write (at any depth, also with reads nested in between) it runs
 *  inline. Inside a read and no write it returns EDEADLK and runs nothing: the upgrade would
 *  deadlock; also EDEADLK (nothing run) when its wait would close a cycle of waiting threads
 *  (section 4). EINVAL: NULL/wrong-type db, NULL work. ENOTRECOVERABLE (nothing run) in a forked
 *  child on a queue that was being written or had writes pending at the fork. */
QK_EXPORT int qk_dbqueue_write(qk_dbqueue_t *db, void *context, qk_function_t work);

/** Queues `work(context)` to run exclusively, FIFO with all writes; returns at once (lock-free).
 *  Allowed anywhere; inside a block of this queue it runs after that block. Every call that begins
 *  after this one returned comes after the write (see qk_dbqueue_t for where the work runs).
 *  EINVAL as qk_dbqueue_write. ENOTRECOVERABLE (nothing queued) in a forked child: the thread
 *  that would run it is gone. The call holds a reference to `db` of its own until it returns: a
 *  thread that flushes the write (running it at once) and then destroys the queue while this call
 *  is still returning frees the queue only after the call has left it. */
QK_EXPORT int qk_dbqueue_write_async(qk_dbqueue_t *db, void *context, qk_function_t work);

/** Waits until every write submitted before the call has run (running them itself when its
 *  thread holds nothing else of QueueKit's, see qk_dbqueue_t). EDEADLK inside a block of this
 *  queue, or when its wait would close a cycle of waiting threads (section 4; the writes still
 *  run); EINVAL for NULL/wrong type; ENOTRECOVERABLE in a forked child on a queue that was being
 *  written or had writes pending at the fork. */
QK_EXPORT int qk_dbqueue_flush(qk_dbqueue_t *db);

/** The queue that stands for `db` in identity checks (borrowed, lives as long as `db`): inside a
 *  read or write qk_queue_current() returns it and qk_queue_check(q, QK_ON_QUEUE) holds; inside a
 *  write QK_ON_QUEUE_AS_BARRIER holds too. It is for identity only: submitting work to it with
 *  the qk_queue_* calls returns EINVAL. NULL with errno EINVAL for a NULL/wrong-type db. */
QK_EXPORT qk_queue_t *qk_dbqueue_queue(qk_dbqueue_t *db);

/* ========================================================================================== */
/* 3. Condition lock                                                                          */
/* ========================================================================================== */

/** An opaque lock plus an integer condition, with NSConditionLock semantics.
 *
 *  The lock (held or free) and the condition (an intptr_t) are two independent states:
 *  qk_condlock_lock ignores the condition and keeps it; qk_condlock_lock_when needs the lock free
 *  *and* the condition equal. qk_condlock_unlock_with sets the condition and releases in one step.
 *
 *  Waiting: a release picks the first queued waiter (in arrival order) that the new state
 *  satisfies -- a plain lock waiter accepts any condition, a lock_when(c) waiter needs c, a
 *  lock_if or await waiter needs its test to be true (qk_condition_test_t) -- and wakes only that
 *  thread. Waiters for other values are not woken (no thundering herd), and queued waiters never
 *  overtake one another. A waiter still polling is handed the lock (made the owner); one asleep in
 *  the kernel is woken to take it itself, and the lock stays free meanwhile, so a running thread
 *  may take it first instead of waiting for the wake-up (eventual fairness, as in Rust's
 *  parking_lot: no convoy of hand-offs to threads that are not running). An overtaken waiter waits
 *  again at its place in line (a futile wake-up); once it has been overtaken for 1 ms since the
 *  first such wake-up, a release hands it the lock (nobody starves). A thread
 *  that cannot take the lock first spins on the lock itself while nobody is queued, for about as
 *  long as spinning took on this lock lately (a microsecond or so where it kept failing, tens of
 *  microseconds at most), taking the lock as a newcomer when a release lets it in; then it queues,
 *  polls, yielding its CPU between polls, for up to about 12 microseconds, and sleeps in the
 *  kernel. Only a thread about to sleep appears in wait reports and deadlock checks.
 *
 *  Ownership is checked: unlock* by a thread that does not hold the lock is EPERM and changes
 *  nothing; lock* by the holder is EDEADLK; trylock* by the holder is EBUSY. The lock is not
 *  recursive. All functions are thread-safe. A destroyed handle must not be used again.
 *  Every function that takes a lock returns EINVAL for a NULL or wrong-type handle. */
typedef struct qk_condlock qk_condlock_t;

/** Creates an unlocked lock whose condition is `condition`. (It cannot fail short of the process
 *  running out of memory, which Swift's allocator treats as fatal.) */
QK_EXPORT qk_condlock_t *qk_condlock_create(intptr_t condition);

/** Frees the lock. EBUSY (nothing done) while it is held or waited on; EINVAL for NULL/wrong
 *  type. No call on the lock may be in progress or follow. An abandoned lock that nobody holds
 *  or waits for is freed (0). */
QK_EXPORT int qk_condlock_destroy(qk_condlock_t *lock);

/** Acquires the lock whatever the condition (which it keeps), waiting as long as needed.
 *  EDEADLK when the calling thread already holds it; EINVAL for NULL/wrong type.
 *  EOWNERDEAD: acquired and held, but the previous holder exited holding it (or did not survive
 *  a fork); every lock* and trylock* call below returns it the same way, a timed one also with a
 *  deadline already past. The holder gets it once; after its release the lock is healthy. */
QK_EXPORT int qk_condlock_lock(qk_condlock_t *lock);

/** Acquires the lock if it is free, whatever the condition; EBUSY otherwise (also when the
 *  caller holds it). Never waits. EOWNERDEAD and EINVAL as qk_condlock_lock. */
QK_EXPORT int qk_condlock_trylock(qk_condlock_t *lock);

/** As qk_condlock_lock, giving up at the absolute CLOCK_MONOTONIC `deadline_ns` (see qk_now_ns;
 *  QK_FOREVER never expires) with ETIMEDOUT, not holding the lock. A deadline already past tries
 *  once: 0 or ETIMEDOUT. A waiter handed the lock at the moment its deadline passes keeps it and
 *  returns 0: a call returns either 0 holding the lock or ETIMEDOUT holding nothing. EDEADLK,
 *  EOWNERDEAD and EINVAL as qk_condlock_lock (a timed wait is never refused for a cycle). */
QK_EXPORT int qk_condlock_lock_until(qk_condlock_t *lock, uint64_t deadline_ns);

/** Returns holding the lock with the condition equal to `condition`, waiting as long as needed
 *  (until a release or qk_condlock_set leaves that value). EDEADLK when the calling thread
 *  already holds the lock, or when its wait would close a cycle of waiting threads (section 4).
 *  EOWNERDEAD and EINVAL as qk_condlock_lock. */
QK_EXPORT int qk_condlock_lock_when(qk_condlock_t *lock, intptr_t condition);

/** Acquires the lock only if it is free and its condition equals `condition`; EBUSY otherwise
 *  (also when the lock is free with another value, or held by the caller). Never waits.
 *  EOWNERDEAD and EINVAL as qk_condlock_lock. */
QK_EXPORT int qk_condlock_trylock_when(qk_condlock_t *lock, intptr_t condition);

/** As qk_condlock_lock_when, giving up at `deadline_ns` with ETIMEDOUT (not holding the lock).
 *  A deadline already past tries once. The timeout rules of qk_condlock_lock_until apply, and its
 *  EDEADLK, EOWNERDEAD and EINVAL. */
QK_EXPORT int qk_condlock_lock_when_until(qk_condlock_t *lock, intptr_t condition,
                                          uint64_t deadline_ns);

/** Releases the lock, keeping the condition; passes it to the first waiter that condition
 *  satisfies, if any (handed, or woken to take it: see the section's introduction). EPERM (nothing changed) when the calling thread does not hold it; EINVAL for
 *  NULL/wrong type. */
QK_EXPORT int qk_condlock_unlock(qk_condlock_t *lock);

/** Sets the condition and releases the lock in one step: no thread sees the lock free with the
 *  old condition. Wakes only the first waiter the new state satisfies. EPERM (nothing changed,
 *  condition included) when the calling thread does not hold the lock; EINVAL for NULL/wrong type. */
QK_EXPORT int qk_condlock_unlock_with(qk_condlock_t *lock, intptr_t condition);

/** Acquires the lock (waiting if needed), then unlock_with(condition): starts a chain from a
 *  thread that does not hold the lock, where NSConditionLock code unlocks a lock it never
 *  locked. Counts as one acquisition. EDEADLK when the calling thread holds it (use
 *  unlock_with), or when its wait would close a cycle of waiting threads (section 4); EINVAL for
 *  NULL/wrong type. On an abandoned lock it returns 0 and leaves EOWNERDEAD for the next acquirer. */
QK_EXPORT int qk_condlock_set(qk_condlock_t *lock, intptr_t condition);

/** Whether the calling thread holds the lock: 0 when it does, EPERM when it does not, EINVAL
 *  for a NULL/wrong-type lock. Changes nothing and counts nothing (it is no acquisition), so it
 *  suits assertions (abseil's AssertHeld, clang's assert_capability) and layers that must answer
 *  EPERM before they act. Thread-safe; never waits. */
QK_EXPORT int qk_condlock_check_held(const qk_condlock_t *lock);

/** 1 while the calling thread holds the lock and acquired it from a holder that exited holding
 *  it (or did not survive a fork): the EOWNERDEAD news of the acquisition, readable however the
 *  lock was acquired, until this thread releases it. 0 otherwise: not held by the caller, a
 *  healthy lock, a NULL/wrong-type lock. Changes nothing. Thread-safe; never waits. */
QK_EXPORT int qk_condlock_owner_died(const qk_condlock_t *lock);

/** The current condition, read without a race and without waiting for the holder. 0 for a
 *  NULL/wrong-type lock. */
QK_EXPORT intptr_t qk_condlock_condition(const qk_condlock_t *lock);

/** Names the lock (the string is copied; NULL clears it). Names appear in diagnostics. 0,
 *  ENOMEM, or EINVAL for a NULL/wrong-type lock. */
QK_EXPORT int qk_condlock_set_name(qk_condlock_t *lock, const char *name);

/** The lock's name, "" when unnamed or for a NULL/wrong-type lock; never NULL. Valid until the
 *  next qk_condlock_set_name or qk_condlock_destroy. */
QK_EXPORT const char *qk_condlock_name(const qk_condlock_t *lock);

/** Counters of a condition lock since creation. */
typedef struct {
    size_t size;             /**< set by the caller to sizeof(qk_condlock_stats_t) */
    uint64_t acquisitions;   /**< successful lock and trylock calls of every kind, and each set */
    uint64_t contended;      /**< acquisitions that had to wait (spinning, or handed the lock) */
    uint64_t wakeups;        /**< times a waiting thread resumed: handed the lock, woken to take
                                  it, or spuriously */
    uint64_t futile_wakeups; /**< wakeups after which the thread had to wait again: a waiter
                                  woken to take the lock that a running thread overtook, and
                                  spurious kernel wake-ups (a release never wakes a waiter
                                  that the state it leaves does not satisfy) */
    uint64_t timeouts;       /**< timed calls that returned ETIMEDOUT, past deadlines included */
    uint64_t abandonments;   /**< times a holder exited holding the lock, or did not survive a
                                  fork (each one makes the next acquisition EOWNERDEAD) */
} qk_condlock_stats_t;

/** Copies the counters into `stats`, writing only the fields that fit in `stats->size` bytes (so
 *  a caller built against a shorter, older struct keeps working). Each counter is read
 *  atomically, but together they are not one snapshot. EINVAL for NULL arguments or a size too small to
 *  hold `acquisitions`. */
QK_EXPORT int qk_condlock_get_stats(const qk_condlock_t *lock, qk_condlock_stats_t *stats);

/* ------------------------------------------------------------------------------------------ */
/* Waits on a test of the condition, and waiting while holding                                 */
/* ------------------------------------------------------------------------------------------ */

/** Defined when this header declares the waits on a test of the condition (qk_condlock_lock_if,
 *  trylock_if, lock_if_until, await, await_until and qk_condition_test_t). */
#define QK_HAVE_CONDITION_TESTS 1

/** A test of a condition lock's condition: true when `condition` is one the waiter accepts.
 *
 *  Called with the lock's internal guard held, on any thread (usually the one releasing the lock,
 *  possibly one that is exiting), any number of times: it must be cheap, must not block, and must
 *  read only `condition` and what `context` points to (which must not change while the wait
 *  lasts, or change only under the lock). A QueueKit call made inside a test returns EDEADLK at
 *  once without waiting or changing anything (a constructor NULL with errno EDEADLK,
 *  qk_copy_wait_report ""), except qk_now_ns, qk_queue_current, qk_strerror, qk_status_name and
 *  qk_condlock_condition, which on the lock under test returns the value under test without
 *  taking the guard (on any other lock, 0).
 *
 *  What a release costs with N queued waiters: the releasing thread walks the line in arrival
 *  order up to the first waiter the new state satisfies, so at most N comparisons; it calls each
 *  test ahead of that waiter at most once, and a test with the same function and context as one
 *  that already said no in this release is skipped without a call (up to 16 such pairs per
 *  release; beyond them each waiter's test is called). With N waiters of one test and context,
 *  a release calls the test once; with N different ones, at most N times. Tests of waiters
 *  behind the one it picks are not called. A waiter woken to take the lock itself walks the line
 *  ahead of it once more, on its own thread, as it takes it. */
typedef bool (*qk_condition_test_t)(intptr_t condition, void *context);

/** Returns holding the lock with `test(condition, context)` true, waiting as long as needed:
 *  immediately when the lock is free and the test holds, otherwise when a release (unlock,
 *  unlock_with, set, a holder's exit) leaves a condition the test accepts and this is the first
 *  queued waiter, in arrival order, that the new state satisfies. Only that waiter is woken (a
 *  running thread may still take the lock ahead of it while it wakes: see the section's
 *  introduction). EDEADLK when the calling thread holds the lock, or when the wait would
 *  close a ring of waiting threads (section 4; a report names the wait qk_condlock_lock_if and
 *  the test function's symbol); EINVAL for a NULL `test` or a NULL/wrong-type lock; EOWNERDEAD
 *  as for qk_condlock_lock (acquired, held, the previous holder died). */
QK_EXPORT int qk_condlock_lock_if(qk_condlock_t *lock, qk_condition_test_t test, void *context);

/** Acquires the lock only if it is free and `test(condition, context)` is true; EBUSY otherwise
 *  (also when the caller holds it). Never waits; the test is called at most once. */
QK_EXPORT int qk_condlock_trylock_if(qk_condlock_t *lock, qk_condition_test_t test, void *context);

/** As qk_condlock_lock_if, giving up at `deadline_ns` with ETIMEDOUT (not holding the lock). A
 *  deadline already past tests once: 0 (or EOWNERDEAD) or ETIMEDOUT. The timeout rules of
 *  qk_condlock_lock_until apply; a timed wait is never refused as a deadlock. */
QK_EXPORT int qk_condlock_lock_if_until(qk_condlock_t *lock, qk_condition_test_t test,
                                        void *context, uint64_t deadline_ns);

/** Releases the held lock, waits until a test of the condition holds, and returns holding it:
 *  pthread_cond_wait without the loop and without the herd. Returns 0 at once when
 *  `test(condition, context)` already holds. Otherwise it queues itself, then releases the
 *  lock as qk_condlock_unlock does (passing it to the first waiter the condition satisfies), so
 *  no release that leaves a satisfying condition can be missed; it is woken only by a release
 *  whose condition its test accepts, and returns 0 holding the lock with the test true.
 *  EPERM (nothing changed) when the calling thread does not hold the lock; EINVAL for a NULL
 *  `test` or a NULL/wrong-type lock; EOWNERDEAD holding the lock when it was handed back after a
 *  holder died holding it. Its release ends the caller's own EOWNERDEAD news.
 *  **EDEADLK: returned WITHOUT the lock**, when the wait would close a ring of waiting threads
 *  (section 4; reported as qk_condlock_await with the test's symbol). Every other return leaves
 *  the caller the holder. */
QK_EXPORT int qk_condlock_await(qk_condlock_t *lock, qk_condition_test_t test, void *context);

/** As qk_condlock_await, giving up at `deadline_ns`: ETIMEDOUT **holding the lock again** (as
 *  pthread_cond_timedwait does), whatever the condition. Retaking the lock after the deadline is
 *  an untimed wait for the lock alone: **where that would close a ring of waiting threads it
 *  returns EDEADLK WITHOUT the lock** (the only return of await_until that drops it). With a
 *  deadline already past it tests once without releasing: 0 or ETIMEDOUT, holding. */
QK_EXPORT int qk_condlock_await_until(qk_condlock_t *lock, qk_condition_test_t test, void *context,
                                      uint64_t deadline_ns);

/* ========================================================================================== */
/* 4. Deadlock detection and wait reports                                                     */
/* ========================================================================================== */

/* A wait-for cycle is a ring of threads, each waiting in an untimed QueueKit call for something
 * the next one holds:
 *
 *   the waiting call                                   waits for           held by
 *   qk_queue_sync / perform (not inline) /             the queue and every every thread running a
 *     barrier_sync on a serial queue                   queue it targets    block of it (or of a queue
 *                                                      (serial, or         targeting it), here or
 *                                                      concurrent and not  further out (a block
 *                                                      a global queue)     waiting in a sync)
 *   qk_queue_barrier_sync on a concurrent queue        the queue and its   every thread running a
 *                                                      targets, as above   block of it, as above
 *   qk_queue_sync / perform (not inline) on a          the queue and its   every thread running a
 *     concurrent queue                                 targets, as above   block of it, as above
 *   qk_condlock_lock, lock_when, lock_if, set, and     the lock            the thread holding it
 *     await* retaking the lock, while held
 *
 * The main thread before qk_main() holds the main queue (a worker that syncs onto the main queue
 * waits for the main thread); after qk_main(), the thread running a main-queue block does. Blocks
 * that have not started hold nothing (a block that dispatch started and that waits for a thread
 * holding the queue on its idle path, section 1, has not started: a sync behind it still waits). A
 * thread that took a queue on the idle path runs a block of it, like a block dispatch runs. A DB queue is held by the threads inside it (readers, the
 * writer, the thread running its asynchronous writes): qk_dbqueue_read behind a write,
 * qk_dbqueue_write, flush and destroy wait for them, and may return EDEADLK (qk_dbqueue_destroy
 * keeps EBUSY inside its own block).
 *
 * A plain qk_queue_sync onto a concurrent queue counts as waiting for every block running there,
 * not only behind a barrier: dispatch lets it in at once only while nothing else is queued on the
 * queue (no barrier pending or running, no earlier waiter, no wake-up in flight), and otherwise
 * queues it until the running blocks complete. QueueKit cannot see dispatch's queue, so a ring
 * through such a sync is refused whenever it could close, never left to hang when it does.
 *
 * Refusal: when an untimed call is about to wait and that wait would close a cycle, it returns
 * EDEADLK instead: it ran nothing, took nothing, lost nothing (a refused lock waiter leaves the
 * lock's queue; one handed the lock at that very moment keeps it and returns 0). Exactly one
 * call per cycle is refused (which one is unspecified); the rest of the ring then proceeds once
 * the refused caller unwinds. Waits that end (a long block, a chain of waits with no ring) are
 * never refused.
 *
 * Not refused, reported (qk_copy_wait_report, the stall handler): timed waits (a deadline other
 * than QK_FOREVER ends by itself: a ring through one is no cycle); qk_condlock_lock_when(c) on a
 * free lock whose condition is not c, and lock_if or await on a free lock whose condition its
 * test refuses (nobody holds what it waits for: nobody is obliged to set the value); rings closed by an asynchronous submission (a barrier_async landing ahead of a
 * waiting sync), where nobody was about to wait.
 *
 * Cost: calls that do not wait do no more than O(1) thread-local bookkeeping; qk_queue_sync onto
 * an idle queue (section 1) takes it with one compare-and-swap and publishes nothing, since it
 * does not wait; one that goes through dispatch publishes its wait with a few uncontended atomic
 * operations (dispatch cannot say beforehand whether it will wait), condition locks only after their spin, before sleeping; the cycle
 * search (under one global lock) runs only on the way into a wait while another thread waits. */

/** Receives a report: `report` is a NUL-terminated, newline-terminated text, valid during the
 *  call only. */
typedef void (*qk_report_function_t)(void *context, const char *report);

/** Sets the function called, on the refused thread and before the refused call returns EDEADLK,
 *  with the report of each cycle across threads that QueueKit refuses. NULL restores the default,
 *  which writes the report to stderr. The report names every thread of the cycle (number and
 *  pthread name), the call it waits in, the object (kind and label or name) and what it holds:
 *
 *    QueueKit: deadlock refused (EDEADLK): qk_queue_sync would wait in a cycle
 *      thread 7 "worker-a": in qk_queue_sync(serial queue "com.example.ui"), holds serial queue "com.example.db"
 *      thread 9 "worker-b": holds serial queue "com.example.ui"; waits in qk_queue_sync(serial queue "com.example.db")  <- refused
 *
 *  The handler may call any QueueKit function (no QueueKit lock is held), but must not wait for
 *  the threads of the cycle. Returns 0. Thread-safe; the change applies to the next refusal. */
QK_EXPORT int qk_set_deadlock_handler(qk_report_function_t handler, void *context);

/** Copies the wait report into `buffer` (strlcpy semantics: at most size - 1 bytes and a NUL;
 *  nothing when size is 0; `buffer` may be NULL then) and returns its full length. The report is
 *  a snapshot of every thread (and suspended Swift task) waiting inside QueueKit right now, one
 *  line each after a heading: the thread, the call, the object, for how long, timed or untimed,
 *  what it waits for (the waiting threads that hold it; for a condition lock its holder, "thread 5
 *  (exited)" for one that is gone, or "condition 3, now 2, lock free"), and what it holds. ""
 *  (returns 0) when nobody waits. Durations are measured at a few milliseconds' resolution; a
 *  qk_queue_sync, barrier_sync or perform (which does not read the clock on its way in: it cannot
 *  tell whether it will wait) is timed from the first time a report, a cycle search or the stall
 *  watch saw it, shown as "for at least".
 *  Thread-safe; the threads it reads cannot stop waiting while it reads them (for microseconds). */
QK_EXPORT size_t qk_copy_wait_report(char *buffer, size_t size);

/** Watches for stalls: when one wait inside QueueKit has lasted `threshold_ns`, calls `handler`
 *  once for that wait (waits that stall together share a call), from a QueueKit thread named
 *  "queuekit-stalls", with the wait report. The watch looks a few times per threshold (at most
 *  every 250 ms, at least every 1 ms), so a stall is reported at most a quarter of the threshold
 *  (and 250 ms) late; for a queue sync, timed from the watch's first sight of it, up to half. threshold_ns == 0 turns the watch off; handler == NULL with a threshold
 *  uses the stderr writer. Replaces the previous watch. The environment variable
 *  QUEUEKIT_STALL_MS=N (milliseconds, 1 to 3600000) turns the watch on with the stderr writer
 *  when the library is loaded; any other value is ignored with one line on stderr. 0, or the
 *  error of starting the watch thread (EAGAIN). Thread-safe. */
QK_EXPORT int qk_set_stall_handler(uint64_t threshold_ns, qk_report_function_t handler,
                                   void *context);

/* ---------------------------------------------------------------------------------------------
 * Lock-order witness: deadlocks before they happen
 *
 * The calls above refuse a ring of threads waiting now. Most deadlocks ship because the two
 * orders that make one ran at different times in testing: thread A takes the DB queue and then
 * the cache lock on one code path, thread B takes the cache lock and then reads the DB queue on
 * another, and the program hangs the first time they meet. The witness remembers in which order
 * threads take condition locks, queues and DB queues, and reports a potential deadlock the first
 * time an order closes a cycle, whether or not anything ever waited.
 *
 * Holding: a thread holds a condition lock it owns (also one a try form took); a serial queue
 * whose block it runs; a concurrent queue whose barrier (exclusive) or other block (shared) it
 * runs; and every queue the block's queue targets, a serial one exclusively, a concurrent one
 * shared (the blocks of the queues targeting it run there beside its own); a DB queue it writes
 * (exclusive; also running a write_async) or reads (shared). The main thread before qk_main()
 * holds the main queue. Global queues are never held.
 *
 * Edges: a call that may wait for Y records, on the way in, an edge X -> Y from every object X
 * its thread holds: qk_condlock_lock, lock_until, lock_when, lock_when_until, lock_if,
 * lock_if_until, set, and await / await_until (which wait to take their lock back); qk_queue_sync,
 * barrier_sync and perform when not inline (a sync also asks for the queues its queue targets, as
 * holding says; a plain sync onto a concurrent queue asks shared); qk_dbqueue_read (shared), write and
 * flush (exclusive). Not edges: the try forms, timed calls whose deadline has passed, calls that
 * run inline because the thread already holds Y, calls refused for what the calling thread itself
 * holds, async submissions, qk_dbqueue_destroy. The edges of lock_when and lock_if go to the
 * lock only (who will set the value is unknown). Timed waits are edges, marked "(timed)": a cycle through one ends in ETIMEDOUT under load
 * where the program expected the lock.
 *
 * Cycles: X1 -> X2 -> ... -> Xn -> X1 is a potential deadlock when at every Xi the edge into it
 * and the edge out of it conflict: they do unless both are shared, and two shared sides conflict
 * once a writer can get between them (reads of a DB queue that has been written, by write or
 * write_async; shared blocks of a concurrent queue that has had a barrier). A cycle held back only
 * by such a meeting of two readers is remembered, and reported by that DB queue's first write (that
 * queue's first barrier), on the writing thread, before the write runs.
 *
 * Reports: an edge is recorded the first time it is seen (per modes, timed or not) and never
 * again; a new edge that closes a cycle is reported at once, with the shortest cycle (at most one
 * report per call), so each cycle is reported once:
 *
 *   QueueKit: lock-order inversion (potential deadlock): qk_dbqueue_read(DB queue "app.db") closes a cycle of 2
 *     DB queue "app.db" (write) -> condition lock "cache": qk_condlock_lock, first by thread 4 "saver" at save+0x3c (/usr/bin/app)
 *     condition lock "cache" -> DB queue "app.db" (read): qk_dbqueue_read, first by thread 6 "ui" at refresh+0x51 (/usr/bin/app)  <- new
 *
 * One line per edge: both objects (kind, label or name; the mode of DB queues, read or write, and
 * of concurrent queues, shared or barrier), the call that took it ("(timed)" if so), the thread
 * that took it first (number and pthread name) and the call site that dladdr finds for the
 * caller's return address (symbol+offset and object; the address when it finds no symbol, as for
 * static functions of a program linked without -rdynamic). The witness only watches: every call
 * returns exactly what it returns without it. In report mode the call then goes on; in abort mode
 * the process calls abort() (SIGABRT) once the report has been delivered.
 *
 * Destroyed objects (qk_condlock_destroy, qk_dbqueue_destroy, the last release of a queue once
 * its blocks ran) are forgotten with their edges: a new object, also one at the same address, has
 * no history. In a forked child the graph starts empty and other threads' holdings are gone; the
 * forking thread keeps what it holds; mode and handler carry over.
 *
 * Cost: off, a relaxed load and a branch per acquisition and release. On, each thread keeps what
 * it holds (64 objects; deeper nesting is not witnessed, one line on stderr) and the edges it has
 * seen; the global graph (one lock) and its cycle search (incremental: it keeps a topological
 * order and searches only the region a new edge disturbs) are touched only on an edge's first
 * sighting, an object's first write or barrier, and destroying an object with edges. At most
 * 65,536 edges: one more prints one line on stderr and turns the witness off. */

/** The witness's modes. */
typedef enum {
    QK_LOCK_ORDER_OFF = 0,    /**< witnessing nothing (the default) */
    QK_LOCK_ORDER_REPORT = 1, /**< each potential deadlock reported once; the call goes on */
    QK_LOCK_ORDER_ABORT = 2   /**< reported, then abort() (SIGABRT) on the reporting thread */
} qk_lock_order_mode_t;

/** Sets the lock-order witness's mode (a qk_lock_order_mode_t value), at any time. The
 *  environment variable QUEUEKIT_LOCK_ORDER=off|report|abort sets it when the library is loaded
 *  (any other value is ignored with one line on stderr naming the variable); in CI, run the test
 *  suite with QUEUEKIT_LOCK_ORDER=abort. The witness knows only what it saw while on: off -> on
 *  starts an empty graph (objects held at that moment are not witnessed), -> off drops it,
 *  report <-> abort keeps it. Returns 0, or EINVAL (nothing changed) for any other value.
 *  Thread-safe. */
QK_EXPORT int qk_set_lock_order_mode(int mode);

/** The witness's mode now, a QK_LOCK_ORDER_* value (QK_LOCK_ORDER_OFF also after the edge limit
 *  turned it off). Thread-safe. */
QK_EXPORT int qk_lock_order_mode(void);

/** Sets the function called with each lock-order report, on the thread whose call closed the
 *  cycle, before that call goes on, with no QueueKit lock held (the thread still holds its own
 *  objects). The handler may call QueueKit: its calls are not witnessed, and one that would wait
 *  returns EDEADLK at once (a free condition lock is taken; a held one, a queue sync and a DB
 *  queue call are refused). NULL restores the default, which writes the report to stderr in one
 *  write. Returns 0. Thread-safe; applies to the next report. */
QK_EXPORT int qk_set_lock_order_handler(qk_report_function_t handler, void *context);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* QUEUEKIT_H */
