// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers
/*
 * queuekit.hpp — the C++ interface of QueueKit: a header-only layer over <queuekit.h>.
 *
 * C++17 and later; clean at -Wall -Wextra -Werror -pedantic with g++ and clang++, with clang's
 * -Wthread-safety, and with -fno-exceptions. Everything is in namespace qk:
 *
 *   qk::queue               a dispatch queue that knows its identity (a value: copies retain)
 *   qk::db_queue            a reentrant reader/writer queue (move-only)
 *   qk::guarded<T>          a T that only its DB queue reaches (read/write with a callable)
 *   qk::condition_lock<E>   a lock plus a condition of type E (Lockable, TimedLockable)
 *
 * This header is the reference manual of the layer: every declaration is documented right above
 * it. The rules of the underlying calls (ordering, deadlock refusal, fork, abandoned locks) are
 * those of <queuekit.h>, which this header includes; what the layer does not wrap (names, stats,
 * specifics, diagnostics) stays reachable through native_handle().
 *
 * Errors
 * ------
 * A failing call throws std::system_error(status, std::generic_category()) whose what() begins
 * with the name of the C function that failed ("qk_queue_sync: Resource deadlock avoided"). Each
 * throwing member has a second overload taking a trailing `std::error_code& ec`: it sets `ec`
 * instead (clears it on success) and returns std::optional<R> for a result R (empty on error;
 * void for void), bool (acquired) for lock, lock_when and lock_if, otherwise void; a
 * constructor of that form leaves the object empty. These forms never throw for QueueKit's
 * errors; exceptions thrown by your callables still propagate. Allocation failure is ENOMEM.
 * Built with -fno-exceptions, the error_code forms work unchanged and a throwing form that fails
 * prints its what() line on stderr and aborts.
 *
 * Callables and exceptions
 * ------------------------
 * Every callable reaches the C API through one noexcept extern "C" trampoline of this header: no
 * C++ exception ever unwinds through the library. An exception thrown by f in sync,
 * barrier_sync, perform, read or write is caught there, kept in a std::exception_ptr and
 * rethrown on the calling thread once the C call has returned: the queue stays healthy. One that
 * escapes an asynchronous callable or a predicate calls std::terminate, as with std::thread.
 *
 * A synchronous call invokes f once, as an rvalue when given one, and moves its result out. R is
 * f's result without reference and cv qualifiers (a reference result comes back as a copy:
 * nothing refers into a block after it ended); it may be void or move-only. async,
 * barrier_async and write_async decay-copy f into one heap allocation per call, invoke it once
 * (as an rvalue, as std::thread does) and destroy it on the thread that ran it, right after it
 * returned. A submission the C call refuses (EINVAL, ENOTRECOVERABLE) destroys it on the calling
 * thread, then reports the error.
 *
 * Misuse that cannot be reported
 * ------------------------------
 * unlock() and unlock_with() are noexcept (BasicLockable); called by a thread that does not hold
 * the lock they print one line on stderr naming the C function and the status
 * ("qk_condlock_unlock: EPERM (...)") and call std::terminate(); so do await and its timed forms
 * without the lock. Destructors never throw: ~condition_lock() while the lock is held or waited
 * on, and ~db_queue() inside its own block (EBUSY) or where its wait would close a cycle of
 * waiting threads (EDEADLK), print such a line and call std::terminate().
 *
 * A callback passed to the C API directly must return normally: a C++ exception escaping one is
 * undefined behaviour (it would unwind through the library's frames, which have no cleanup for
 * it, and leave QueueKit's state corrupted). Pass C++ callables through this header, whose
 * trampolines catch.
 *
 * Deadlines
 * ---------
 * Timed members take any std::chrono duration or time point. std::chrono::steady_clock is
 * CLOCK_MONOTONIC, QueueKit's clock: its time points are used as they are. A time point of
 * another clock is converted once, at the call (qk_now_ns() plus t - Clk::now()): later jumps of
 * that clock change nothing. Durations round up to whole nanoseconds, so a timed call never
 * times out before its deadline. Only an exact duration::max() or time_point::max() means
 * forever (QK_FOREVER: an untimed wait, which deadlock detection may refuse; a refused try_*
 * returns false like a timeout). A sum or conversion that overflows saturates to
 * QK_FOREVER - 1 (still timed). A zero or negative duration, or a time point already past,
 * tries once without waiting.
 *
 * Thread-safety analysis
 * ----------------------
 * With clang, condition_lock is a capability ("mutex") for -Wthread-safety: lock, lock_when and
 * lock_if acquire it; the try_* members and the bool error_code forms try to acquire it (true);
 * unlock and unlock_with release it; await and its timed forms require it; set excludes it.
 * Compilers without these attributes (g++) see none. Declare the data a lock protects with
 * QK_GUARDED_BY(lock) to have clang check the accesses.
 */
#ifndef QUEUEKIT_HPP
#define QUEUEKIT_HPP

#if !defined(__cplusplus) || __cplusplus < 201703L
#error "<queuekit.hpp> needs C++17 or later (C programs include <queuekit.h>)"
#endif

#include <queuekit.h>

// The layer in three parts (each documented declaration by declaration): the internals and the
// QK_ macros, the queues, and the condition lock.
#include <queuekit/detail.hpp>
#include <queuekit/queues.hpp>
#include <queuekit/condition_lock.hpp>

#endif /* QUEUEKIT_HPP */
