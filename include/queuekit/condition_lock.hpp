// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers
/*
 * queuekit/condition_lock.hpp — qk::condition_lock<E>.
 * A part of <queuekit.hpp>: include that header, not this one.
 */
#ifndef QUEUEKIT_CONDITION_LOCK_HPP
#define QUEUEKIT_CONDITION_LOCK_HPP

#ifndef QUEUEKIT_HPP
#error "include <queuekit.hpp>, not <queuekit/condition_lock.hpp>"
#endif

namespace qk {

/* ========================================================================================== */
/* qk::condition_lock<E>                                                                      */
/* ========================================================================================== */

/** A lock plus a condition of type E (qk_condlock_t): NSConditionLock semantics, no herd,
 *  arrival order, checked ownership. E is any trivially copyable type that fits in intptr_t:
 *  enums, integers and bool convert by value, other types bytewise (equality is then bitwise).
 *  Lockable and TimedLockable: std::lock_guard, std::unique_lock, std::scoped_lock and std::lock
 *  work. lock* and set by the holder (and an untimed wait refused for a cycle) throw EDEADLK;
 *  try_* return false whenever they did not acquire. EOWNERDEAD is no error: the call returns
 *  holding the lock and owner_died() is true until the holder releases. Not copied or moved. */
template <class E = std::intptr_t> class QK_CAPABILITY("mutex") condition_lock {
    static_assert(std::is_trivially_copyable_v<E>,
                  "qk::condition_lock<E>: E must be trivially copyable");
    static_assert(sizeof(E) <= sizeof(std::intptr_t),
                  "qk::condition_lock<E>: E must fit in intptr_t");

  public:
    /** The type of the condition. */
    using condition_type = E;

    /** An unlocked lock with the condition E(). */
    condition_lock() noexcept : condition_lock(E()) {}
    /** An unlocked lock with the condition `initial` (qk_condlock_create). */
    explicit condition_lock(E initial) noexcept
        : handle_(qk_condlock_create(detail::to_condition(initial))) {
        if (handle_ == nullptr) detail::misuse(ENOMEM, "qk_condlock_create");
    }
    condition_lock(const condition_lock &) = delete;
    condition_lock &operator=(const condition_lock &) = delete;
    /** Destroys the lock (qk_condlock_destroy). While it is held (by any thread, this one too)
     *  or waited on, prints one line and calls std::terminate(). */
    ~condition_lock() {
        int status = qk_condlock_destroy(handle_);
        if (status != 0) detail::misuse(status, "qk_condlock_destroy");
    }

    /** Acquires the lock whatever the condition, waiting as needed (qk_condlock_lock). Throws
     *  std::system_error EDEADLK when the caller holds it, or when the wait would close a cycle. */
    void lock() QK_ACQUIRE() {
        acquired(qk_condlock_lock(handle_), "qk_condlock_lock");
    }
    /** lock, reporting the error in `ec`: true when acquired. */
    bool lock(std::error_code &ec) noexcept QK_TRY_ACQUIRE(true) {
        return acquired(qk_condlock_lock(handle_), ec);
    }

    /** Returns holding the lock with the condition equal to `c` (qk_condlock_lock_when). Errors
     *  as lock. */
    void lock_when(E c) QK_ACQUIRE() {
        acquired(qk_condlock_lock_when(handle_, detail::to_condition(c)), "qk_condlock_lock_when");
    }
    /** lock_when, reporting the error in `ec`: true when acquired. */
    bool lock_when(E c, std::error_code &ec) noexcept QK_TRY_ACQUIRE(true) {
        return acquired(qk_condlock_lock_when(handle_, detail::to_condition(c)), ec);
    }

    /** Acquires the lock, then releases it with the condition `c` (qk_condlock_set): starts a
     *  chain from a thread that does not hold the lock. Throws std::system_error EDEADLK when
     *  the caller holds it (use unlock_with) or when the wait would close a cycle. */
    void set(E c) QK_EXCLUDES(this) {
        int status = qk_condlock_set(handle_, detail::to_condition(c));
        if (status != 0) detail::fail(status, "qk_condlock_set");
    }
    /** set, reporting the error in `ec`. */
    void set(E c, std::error_code &ec) noexcept QK_EXCLUDES(this) {
        detail::set_status(ec, qk_condlock_set(handle_, detail::to_condition(c)));
    }

    /** Releases the lock, keeping the condition (qk_condlock_unlock). Not holding it: one line
     *  on stderr, then std::terminate(). */
    void unlock() noexcept QK_RELEASE() {
        int status = qk_condlock_unlock(handle_);
        if (status != 0) detail::misuse(status, "qk_condlock_unlock");
    }
    /** Sets the condition and releases the lock in one step (qk_condlock_unlock_with). Not
     *  holding it: one line on stderr, then std::terminate(). */
    void unlock_with(E c) noexcept QK_RELEASE() {
        int status = qk_condlock_unlock_with(handle_, detail::to_condition(c));
        if (status != 0) detail::misuse(status, "qk_condlock_unlock_with");
    }

    /** Acquires the lock if it is free (qk_condlock_trylock); never waits. */
    bool try_lock() noexcept QK_TRY_ACQUIRE(true) {
        return acquired(qk_condlock_trylock(handle_));
    }
    /** Acquires the lock if it is free with the condition `c` (qk_condlock_trylock_when). */
    bool try_lock_when(E c) noexcept QK_TRY_ACQUIRE(true) {
        return acquired(qk_condlock_trylock_when(handle_, detail::to_condition(c)));
    }
    /** As lock, giving up after `d` (qk_condlock_lock_until); false when it did not acquire. */
    template <class Rep, class Per>
    bool try_lock_for(const std::chrono::duration<Rep, Per> &d) noexcept QK_TRY_ACQUIRE(true) {
        return acquired(qk_condlock_lock_until(handle_, detail::deadline_after(d)));
    }
    /** As lock, giving up at `t` (qk_condlock_lock_until); false when it did not acquire. */
    template <class Clk, class Dur>
    bool try_lock_until(const std::chrono::time_point<Clk, Dur> &t) noexcept QK_TRY_ACQUIRE(true) {
        return acquired(qk_condlock_lock_until(handle_, detail::deadline_at(t)));
    }
    /** As lock_when, giving up after `d` (qk_condlock_lock_when_until). */
    template <class Rep, class Per>
    bool try_lock_when_for(E c, const std::chrono::duration<Rep, Per> &d) noexcept
        QK_TRY_ACQUIRE(true) {
        return acquired(qk_condlock_lock_when_until(handle_, detail::to_condition(c),
                                                    detail::deadline_after(d)));
    }
    /** As lock_when, giving up at `t` (qk_condlock_lock_when_until). */
    template <class Clk, class Dur>
    bool try_lock_when_until(E c, const std::chrono::time_point<Clk, Dur> &t) noexcept
        QK_TRY_ACQUIRE(true) {
        return acquired(
            qk_condlock_lock_when_until(handle_, detail::to_condition(c), detail::deadline_at(t)));
    }

#if defined(QK_HAVE_CONDITION_TESTS)
    /** Returns holding the lock with pred(condition()) true (qk_condlock_lock_if). `pred`, a
     *  bool(E) callable, runs inside the library on any thread, maybe often: it must be cheap,
     *  never block and read only the condition and data that does not change during the wait
     *  (an exception escaping it calls std::terminate). Errors as lock. */
    template <class P> void lock_if(P pred) QK_ACQUIRE() {
        detail::predicate_thunk<E, P> t(pred);
        acquired(qk_condlock_lock_if(handle_, &detail::qk_cxx_test_trampoline, test_context(t)),
                 "qk_condlock_lock_if");
    }
    /** lock_if, reporting the error in `ec`: true when acquired. */
    template <class P> bool lock_if(P pred, std::error_code &ec) noexcept QK_TRY_ACQUIRE(true) {
        detail::predicate_thunk<E, P> t(pred);
        return acquired(
            qk_condlock_lock_if(handle_, &detail::qk_cxx_test_trampoline, test_context(t)), ec);
    }
    /** Acquires the lock if it is free and pred holds (qk_condlock_trylock_if); never waits. */
    template <class P> bool try_lock_if(P pred) noexcept QK_TRY_ACQUIRE(true) {
        detail::predicate_thunk<E, P> t(pred);
        return acquired(
            qk_condlock_trylock_if(handle_, &detail::qk_cxx_test_trampoline, test_context(t)));
    }
    /** As lock_if, giving up after `d` (qk_condlock_lock_if_until). */
    template <class P, class Rep, class Per>
    bool try_lock_if_for(P pred, const std::chrono::duration<Rep, Per> &d) noexcept
        QK_TRY_ACQUIRE(true) {
        detail::predicate_thunk<E, P> t(pred);
        return acquired(qk_condlock_lock_if_until(handle_, &detail::qk_cxx_test_trampoline,
                                                  test_context(t), detail::deadline_after(d)));
    }
    /** As lock_if, giving up at `t` (qk_condlock_lock_if_until). */
    template <class P, class C, class D>
    bool try_lock_if_until(P pred, const std::chrono::time_point<C, D> &tp) noexcept
        QK_TRY_ACQUIRE(true) {
        detail::predicate_thunk<E, P> t(pred);
        return acquired(qk_condlock_lock_if_until(handle_, &detail::qk_cxx_test_trampoline,
                                                  test_context(t), detail::deadline_at(tp)));
    }

    /** The holder waits until pred(condition()) holds (qk_condlock_await), the shape of
     *  std::condition_variable::wait(lock, pred): returns at once when it holds already;
     *  otherwise releases the lock (handing it to the first waiter the condition satisfies),
     *  waits, and returns holding it with pred true. Only the waiter whose predicate holds is
     *  woken. Called without the lock: one line on stderr, then std::terminate(). Throws
     *  std::system_error EDEADLK when the wait would close a cycle, and then, as
     *  qk_condlock_await, the caller no longer holds the lock (a std::unique_lock around the
     *  call must release() it before it unwinds). */
    template <class P> void await(P pred) QK_REQUIRES(this) {
        detail::predicate_thunk<E, P> t(pred);
        int status = qk_condlock_await(handle_, &detail::qk_cxx_test_trampoline, test_context(t));
        if (status == EPERM) detail::misuse(status, "qk_condlock_await");
        acquired(status, "qk_condlock_await");
    }
    /** await, reporting the error in `ec` (without the lock: std::terminate as above). */
    template <class P> void await(P pred, std::error_code &ec) noexcept QK_REQUIRES(this) {
        detail::predicate_thunk<E, P> t(pred);
        int status = qk_condlock_await(handle_, &detail::qk_cxx_test_trampoline, test_context(t));
        if (status == EPERM) detail::misuse(status, "qk_condlock_await");
        acquired(status, ec);
    }
    /** As await, giving up after `d` (qk_condlock_await_until): false on timeout, holding the
     *  lock again either way. A deadline already past tests once without releasing. Where
     *  retaking the lock after the deadline would close a cycle (EDEADLK, the lock lost), and
     *  without the lock, prints one line and calls std::terminate(). */
    template <class P, class Rep, class Per>
    bool await_for(P pred, const std::chrono::duration<Rep, Per> &d) noexcept QK_REQUIRES(this) {
        return await_deadline(pred, detail::deadline_after(d));
    }
    /** As await_for, giving up at `t`. */
    template <class P, class C, class D>
    bool await_until(P pred, const std::chrono::time_point<C, D> &t) noexcept QK_REQUIRES(this) {
        return await_deadline(pred, detail::deadline_at(t));
    }
#endif

    /** The current condition, read without a race and without waiting (qk_condlock_condition). */
    E condition() const noexcept {
        return detail::from_condition<E>(qk_condlock_condition(handle_));
    }
    /** True while the calling thread holds the lock and acquired it from a holder that exited
     *  holding it (qk_condlock_owner_died): the data it guards may be half-updated. */
    bool owner_died() const noexcept {
        return qk_condlock_owner_died(handle_) == 1;
    }
    /** The C handle (borrowed), for names, stats and diagnostics. */
    qk_condlock_t *native_handle() const noexcept {
        return handle_;
    }

  private:
    /** An acquisition's status as a bool; EOWNERDEAD acquired too. */
    static bool acquired(int status) noexcept {
        return status == 0 || status == EOWNERDEAD;
    }
    static void acquired(int status, const char *call) {
        if (!acquired(status)) detail::fail(status, call);
    }
    static bool acquired(int status, std::error_code &ec) noexcept {
        bool held = acquired(status);
        detail::set_status(ec, held ? 0 : status);
        return held;
    }
#if defined(QK_HAVE_CONDITION_TESTS)
    static void *test_context(const detail::test_thunk &t) noexcept {
        return const_cast<void *>(static_cast<const void *>(&t));
    }
    template <class P> bool await_deadline(P &pred, std::uint64_t deadline) noexcept {
        detail::predicate_thunk<E, P> t(pred);
        int status = qk_condlock_await_until(handle_, &detail::qk_cxx_test_trampoline,
                                             test_context(t), deadline);
        if (status == 0 || status == EOWNERDEAD) return true;
        if (status == ETIMEDOUT) return false;
        detail::misuse(status, "qk_condlock_await_until");
    }
#endif

    qk_condlock_t *handle_;
};

/** CTAD: qk::condition_lock l{state::idle}; is a condition_lock<state>. */
template <class E> condition_lock(E) -> condition_lock<E>;

} // namespace qk

#endif /* QUEUEKIT_CONDITION_LOCK_HPP */
