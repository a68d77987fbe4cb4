// SPDX-License-Identifier: Apache-2.0
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

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <new>
#include <optional>
#include <ratio>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

/* ---- Configuration ----------------------------------------------------------------------- */

/** 1 when the translation unit is compiled with C++ exceptions, 0 under -fno-exceptions. */
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#define QK_CXX_EXCEPTIONS 1
#else
#define QK_CXX_EXCEPTIONS 0
#endif

#if defined(__has_attribute)
#define QK_CXX_HAS_ATTRIBUTE(x) __has_attribute(x)
#else
#define QK_CXX_HAS_ATTRIBUTE(x) 0
#endif

/** Clang thread-safety attributes, empty where the compiler lacks them. QK_GUARDED_BY(lock) and
 *  QK_PT_GUARDED_BY(lock) are for your data; the others annotate condition_lock. */
#if QK_CXX_HAS_ATTRIBUTE(capability)
#define QK_CAPABILITY(x) __attribute__((capability(x)))
#define QK_GUARDED_BY(x) __attribute__((guarded_by(x)))
#define QK_PT_GUARDED_BY(x) __attribute__((pt_guarded_by(x)))
#define QK_ACQUIRE(...) __attribute__((acquire_capability(__VA_ARGS__)))
#define QK_TRY_ACQUIRE(...) __attribute__((try_acquire_capability(__VA_ARGS__)))
#define QK_RELEASE(...) __attribute__((release_capability(__VA_ARGS__)))
#define QK_REQUIRES(...) __attribute__((requires_capability(__VA_ARGS__)))
#define QK_EXCLUDES(...) __attribute__((locks_excluded(__VA_ARGS__)))
#define QK_NO_THREAD_SAFETY_ANALYSIS __attribute__((no_thread_safety_analysis))
#else
#define QK_CAPABILITY(x)
#define QK_GUARDED_BY(x)
#define QK_PT_GUARDED_BY(x)
#define QK_ACQUIRE(...)
#define QK_TRY_ACQUIRE(...)
#define QK_RELEASE(...)
#define QK_REQUIRES(...)
#define QK_EXCLUDES(...)
#define QK_NO_THREAD_SAFETY_ANALYSIS
#endif

namespace qk {

/* ========================================================================================== */
/* Details: errors, trampolines, deadlines (not part of the interface)                       */
/* ========================================================================================== */

namespace detail {

/** Reports a failed throwing call: throws std::system_error naming `call`, or, without
 *  exceptions, prints that what() line and aborts. */
[[noreturn]] inline void fail(int status, const char* call) {
#if QK_CXX_EXCEPTIONS
    throw std::system_error(status, std::generic_category(), call);
#else
    std::fprintf(stderr, "%s: %s\n", call, std::generic_category().message(status).c_str());
    std::abort();
#endif
}

/** Misuse where nothing can be reported (noexcept members, destructors): one line, then
 *  std::terminate. */
[[noreturn]] inline void misuse(int status, const char* call) noexcept {
    std::fprintf(stderr, "%s: %s (%s)\n", call, qk_status_name(status), qk_strerror(status));
    std::terminate();
}

/** Sets `ec` from a status (clears it for 0). */
inline void set_status(std::error_code& ec, int status) noexcept {
    if (status == 0) {
        ec.clear();
    } else {
        ec.assign(status, std::generic_category());
    }
}

/** errno after a failed constructor call, never 0. */
inline int creation_status() noexcept { return errno != 0 ? errno : ENOMEM; }

/** Every callable the layer passes to the C API starts with one of these: the one extern "C"
 *  trampoline below calls `invoke` with it. */
struct thunk {
    void (*invoke)(thunk*) noexcept;
};

/** The result of f() as R: without reference and cv qualifiers. */
template <class F, class... Args>
using result_t = std::remove_cv_t<std::remove_reference_t<std::invoke_result_t<F, Args...>>>;

/** What an error_code form returns for a result R: std::optional<R>, or void. */
template <class R>
using ec_result_t = std::conditional_t<std::is_void_v<R>, void, std::optional<R>>;

/** Where a synchronous call leaves its result. */
template <class R>
struct slot {
    std::optional<R> value;
    template <class F>
    void fill(F&& f) { value.emplace(std::invoke(std::forward<F>(f))); }
    R take() { return std::move(*value); }
    std::optional<R> take_optional() { return std::move(value); }
};
template <>
struct slot<void> {
    template <class F>
    void fill(F&& f) { std::invoke(std::forward<F>(f)); }
    void take() {}
};

/** A synchronous call's context, on the caller's stack: the callable (by reference), its result
 *  and the exception it threw. */
template <class F, class R>
struct sync_thunk : thunk {
    std::remove_reference_t<F>& f;
    slot<R> result;
#if QK_CXX_EXCEPTIONS
    std::exception_ptr error;
#endif
    explicit sync_thunk(std::remove_reference_t<F>& fn) noexcept : thunk{&run}, f(fn) {}
    static void run(thunk* t) noexcept {
        auto& self = *static_cast<sync_thunk*>(t);
#if QK_CXX_EXCEPTIONS
        try {
            self.result.fill(static_cast<F&&>(self.f));
        } catch (...) {
            self.error = std::current_exception();
        }
#else
        self.result.fill(static_cast<F&&>(self.f));
#endif
    }
    /** After the C call returned 0: rethrows what f threw. */
    void rethrow() {
#if QK_CXX_EXCEPTIONS
        if (error) std::rethrow_exception(std::move(error));
#endif
    }
};

/** An asynchronous call's context, on the heap: the decay-copied callable D, invoked once as an
 *  rvalue and destroyed right after, on the thread that ran it. */
template <class D>
struct async_thunk : thunk {
    D f;
    template <class... Args>
    explicit async_thunk(Args&&... args) : thunk{&run}, f(std::forward<Args>(args)...) {}
    static void run(thunk* t) noexcept {
        auto* self = static_cast<async_thunk*>(t);
        std::invoke(std::move(self->f));
        delete self;
    }
};

/** A predicate's context for the condition tests of section 3a: `invoke` converts the value. */
struct test_thunk {
    bool (*invoke)(const test_thunk*, std::intptr_t) noexcept;
};

extern "C" {
/** The one trampoline through which every callable of this header reaches the C API. */
inline void qk_cxx_trampoline(void* context) noexcept {
    thunk* t = static_cast<thunk*>(context);
    t->invoke(t);
}
/** The trampoline of the predicates (a qk_condition_test_t). */
inline bool qk_cxx_test_trampoline(std::intptr_t condition, void* context) noexcept {
    const test_thunk* t = static_cast<const test_thunk*>(context);
    return t->invoke(t, condition);
}
}

/** A C submission bound to its handle: `submit(context, trampoline)` calls call(handle, ...). */
template <class Handle>
struct submitter {
    Handle* handle;
    int (*call)(Handle*, void*, qk_function_t);
    int operator()(void* context, qk_function_t work) const noexcept { return call(handle, context, work); }
};

/** Runs f through `submit(context, trampoline)` (a synchronous C call); returns f's result or
 *  throws (the C call's error, named `call`, or what f threw). */
template <class F, class Submit>
result_t<F> call_sync(const char* call, F&& f, Submit&& submit) {
    using R = result_t<F>;
    sync_thunk<F, R> t(f);
    int status = submit(static_cast<void*>(static_cast<thunk*>(&t)), &qk_cxx_trampoline);
    if (status != 0) fail(status, call);
    t.rethrow();
    return t.result.take();
}

/** As call_sync, setting `ec` instead of throwing the C call's error. */
template <class F, class Submit>
ec_result_t<result_t<F>> call_sync(std::error_code& ec, F&& f, Submit&& submit) {
    using R = result_t<F>;
    sync_thunk<F, R> t(f);
    int status = submit(static_cast<void*>(static_cast<thunk*>(&t)), &qk_cxx_trampoline);
    set_status(ec, status);
    if constexpr (std::is_void_v<R>) {
        if (status == 0) t.rethrow();
    } else {
        if (status != 0) return std::nullopt;
        t.rethrow();
        return t.result.take_optional();
    }
}

/** Decay-copies into a heap thunk of type D (constructed from `args`) and submits it; on refusal
 *  destroys it here. Returns the status (ENOMEM when the allocation failed). */
template <class D, class Submit, class... Args>
int call_async(Submit&& submit, Args&&... args) {
    auto* t = new (std::nothrow) async_thunk<D>(std::forward<Args>(args)...);
    if (t == nullptr) return ENOMEM;
    int status = submit(static_cast<void*>(static_cast<thunk*>(t)), &qk_cxx_trampoline);
    if (status != 0) delete t;
    return status;
}

/* ---- Deadlines --------------------------------------------------------------------------- */

/** What a relative time of 2^62 ns (146 years) or more becomes: the saturated deadline. */
constexpr std::uint64_t far_ns = QK_FOREVER - 1;
/** The largest relative time converted exactly. */
constexpr long double exact_ns_limit = static_cast<long double>(std::uint64_t(1) << 62);

/** A positive duration in nanoseconds, rounded up; far_ns when it reaches 2^62 ns (no overflow
 *  on the way). */
template <class Rep, class Period>
std::uint64_t positive_ns(const std::chrono::duration<Rep, Period>& d) noexcept {
    long double approx = std::chrono::duration<long double, std::nano>(d).count();
    if (!(approx < exact_ns_limit)) return far_ns;
    if constexpr (std::is_floating_point_v<Rep> || std::ratio_less_v<Period, std::nano>) {
        long double whole = static_cast<long double>(static_cast<std::uint64_t>(approx));
        return static_cast<std::uint64_t>(whole) + (whole < approx ? 1 : 0);
    } else {
        return static_cast<std::uint64_t>(std::chrono::ceil<std::chrono::nanoseconds>(d).count());
    }
}

/** `base` + `relative`, saturated to QK_FOREVER - 1. */
inline std::uint64_t saturating_add(std::uint64_t base, std::uint64_t relative) noexcept {
    return relative >= QK_FOREVER - 1 - base ? QK_FOREVER - 1 : base + relative;
}

/** The absolute CLOCK_MONOTONIC deadline `d` from now: QK_FOREVER for exactly max(), 0 (already
 *  past: try once) for zero or negative. */
template <class Rep, class Period>
std::uint64_t deadline_after(const std::chrono::duration<Rep, Period>& d) noexcept {
    using duration = std::chrono::duration<Rep, Period>;
    if (d == duration::max()) return QK_FOREVER;
    if (!(d > duration::zero())) return 0;
    return saturating_add(qk_now_ns(), positive_ns(d));
}

/** The absolute CLOCK_MONOTONIC deadline of a time point of any clock. */
template <class Clock, class Duration>
std::uint64_t deadline_at(const std::chrono::time_point<Clock, Duration>& t) noexcept {
    using time_point = std::chrono::time_point<Clock, Duration>;
    if (t == time_point::max()) return QK_FOREVER;
    if constexpr (std::is_same_v<Clock, std::chrono::steady_clock>) {
        const auto since = t.time_since_epoch();
        if (!(since > Duration::zero())) return 0;
        return saturating_add(0, positive_ns(since));
    } else {
        const auto now = Clock::now();
        const std::uint64_t base = qk_now_ns();
        // Compared as long double nanoseconds first: t - now may not fit in the common type.
        using wide = std::chrono::duration<long double, std::nano>;
        const long double gap = wide(t.time_since_epoch()).count() - wide(now.time_since_epoch()).count();
        if (!(gap > 0)) return 0;
        if (!(gap < exact_ns_limit)) return far_ns;
        return saturating_add(base, positive_ns(t - now));
    }
}

/* ---- Conditions ---------------------------------------------------------------------------- */

/** E as the C condition: enums, integers and bool by value, other types bytewise. */
template <class E>
std::intptr_t to_condition(const E& value) noexcept {
    if constexpr (std::is_enum_v<E> || std::is_integral_v<E>) {
        return static_cast<std::intptr_t>(value);
    } else {
        std::intptr_t bits = 0;
        std::memcpy(&bits, &value, sizeof(E));
        return bits;
    }
}

/** The C condition as E (the inverse of to_condition). */
template <class E>
E from_condition(std::intptr_t condition) noexcept {
    if constexpr (std::is_enum_v<E>) {
        return static_cast<E>(static_cast<std::underlying_type_t<E>>(condition));
    } else if constexpr (std::is_same_v<E, bool>) {
        return condition != 0;
    } else if constexpr (std::is_integral_v<E>) {
        return static_cast<E>(condition);
    } else {
        alignas(E) unsigned char bytes[sizeof(E)];
        std::memcpy(bytes, &condition, sizeof(E));
        return *std::launder(reinterpret_cast<E*>(bytes));
    }
}

/** A predicate on E, seen by the C test trampoline. */
template <class E, class P>
struct predicate_thunk : test_thunk {
    P& pred;
    explicit predicate_thunk(P& p) noexcept : test_thunk{&run}, pred(p) {}
    static bool run(const test_thunk* t, std::intptr_t condition) noexcept {
        auto& self = *static_cast<const predicate_thunk*>(t);
        return static_cast<bool>(std::invoke(self.pred, from_condition<E>(condition)));
    }
};

}  // namespace detail

/* ========================================================================================== */
/* qk::queue                                                                                  */
/* ========================================================================================== */

/** A dispatch queue that knows its identity (qk_queue_t). A value: copies retain the queue, the
 *  destructor releases it; copies and moves are noexcept. An empty queue (default-constructed,
 *  moved-from, or a failed error_code constructor) answers EINVAL to every call. */
class queue {
public:
    /** An empty queue: every call on it is EINVAL. */
    queue() noexcept = default;

    /** Creates a queue (qk_queue_create): `label` may be nullptr (it is copied). Throws
     *  std::system_error (EINVAL for a bad kind, ENOMEM). */
    explicit queue(const char* label, qk_queue_kind_t kind = QK_QUEUE_SERIAL)
        : handle_(qk_queue_create(label, kind)) {
        if (handle_ == nullptr) detail::fail(detail::creation_status(), "qk_queue_create");
    }

    /** As above; on failure sets `ec` and leaves the queue empty. */
    queue(const char* label, qk_queue_kind_t kind, std::error_code& ec) noexcept
        : handle_(qk_queue_create(label, kind)) {
        detail::set_status(ec, handle_ == nullptr ? detail::creation_status() : 0);
    }

    /** Creates a queue whose blocks run on `target` (qk_queue_create_with_target; an empty
     *  target is none). Throws std::system_error (EINVAL for a bad kind or an identity-only
     *  target, ENOMEM). */
    queue(const char* label, qk_queue_kind_t kind, const queue& target)
        : handle_(qk_queue_create_with_target(label, kind, target.handle_)) {
        if (handle_ == nullptr) detail::fail(detail::creation_status(), "qk_queue_create_with_target");
    }

    /** As above; on failure sets `ec` and leaves the queue empty. */
    queue(const char* label, qk_queue_kind_t kind, const queue& target, std::error_code& ec) noexcept
        : handle_(qk_queue_create_with_target(label, kind, target.handle_)) {
        detail::set_status(ec, handle_ == nullptr ? detail::creation_status() : 0);
    }

    /** Another reference to the same queue. */
    queue(const queue& other) noexcept : handle_(qk_queue_retain(other.handle_)) {}
    /** Takes `other`'s reference; `other` becomes empty. */
    queue(queue&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
    /** Refers to `other`'s queue (releasing the previous one). */
    queue& operator=(const queue& other) noexcept {
        qk_queue_t* previous = std::exchange(handle_, qk_queue_retain(other.handle_));
        qk_queue_release(previous);
        return *this;
    }
    /** Takes `other`'s reference (releasing the previous one); `other` becomes empty. */
    queue& operator=(queue&& other) noexcept {
        if (this != &other) {
            qk_queue_release(handle_);
            handle_ = std::exchange(other.handle_, nullptr);
        }
        return *this;
    }
    /** Releases the reference (the queue lives on while blocks are pending). */
    ~queue() { qk_queue_release(handle_); }

    /** The main queue (qk_queue_main). */
    static queue main() noexcept { return adopt(qk_queue_main()); }
    /** The global concurrent queue of a QoS class; empty for a bad class. */
    static queue global(qk_qos_t qos = QK_QOS_DEFAULT) noexcept { return adopt(qk_queue_global(qos)); }
    /** The queue whose block the calling thread runs (qk_queue_current), retained; empty
     *  outside any queue. */
    static queue current() noexcept { return retain(qk_queue_current()); }
    /** A queue value for `q` that adds a reference (the caller keeps its own). */
    static queue retain(qk_queue_t* q) noexcept { return adopt(qk_queue_retain(q)); }
    /** A queue value for `q` that takes over the caller's reference (released by its
     *  destructor). */
    static queue adopt(qk_queue_t* q) noexcept {
        queue result;
        result.handle_ = q;
        return result;
    }

    /** The C handle (borrowed; nullptr when empty). */
    qk_queue_t* native_handle() const noexcept { return handle_; }
    /** Whether the queue is not empty. */
    explicit operator bool() const noexcept { return handle_ != nullptr; }
    /** The label (qk_queue_label): "" when anonymous or empty; valid as long as the queue. */
    const char* label() const noexcept { return qk_queue_label(handle_); }
    /** Whether this queue is the current queue or one of its targets (qk_queue_is_current). */
    bool is_current() const noexcept { return qk_queue_is_current(handle_); }
    /** Whether the predicate holds for the calling thread (qk_queue_check(...) == 0). */
    bool check(qk_predicate_t p = QK_ON_QUEUE) const noexcept { return qk_queue_check(handle_, p) == 0; }
    /** Aborts with one line on stderr unless the predicate holds (qk_queue_precondition). */
    void precondition(qk_predicate_t p = QK_ON_QUEUE) const noexcept { qk_queue_precondition(handle_, p); }

    /** Runs f on the queue and waits for it (qk_queue_sync); returns its result. Throws
     *  std::system_error: EDEADLK (f not run) where dispatch would deadlock, e.g. onto the
     *  serial queue the thread is running; EINVAL when empty; ENOTRECOVERABLE in a forked child.
     *  What f throws is rethrown here. */
    template <class F>
    detail::result_t<F> sync(F&& f) {
        return detail::call_sync("qk_queue_sync", std::forward<F>(f), submit(qk_queue_sync));
    }
    /** sync, reporting the C call's error in `ec`: std::optional of the result (void for void). */
    template <class F>
    detail::ec_result_t<detail::result_t<F>> sync(F&& f, std::error_code& ec) {
        return detail::call_sync(ec, std::forward<F>(f), submit(qk_queue_sync));
    }

    /** Runs f as a barrier and waits for it (qk_queue_barrier_sync): alone on a concurrent
     *  queue. EDEADLK when the thread runs any block of this queue. Otherwise as sync. */
    template <class F>
    detail::result_t<F> barrier_sync(F&& f) {
        return detail::call_sync("qk_queue_barrier_sync", std::forward<F>(f), submit(qk_queue_barrier_sync));
    }
    /** barrier_sync, reporting the C call's error in `ec`. */
    template <class F>
    detail::ec_result_t<detail::result_t<F>> barrier_sync(F&& f, std::error_code& ec) {
        return detail::call_sync(ec, std::forward<F>(f), submit(qk_queue_barrier_sync));
    }

    /** Runs f on the queue now, the safe way (qk_queue_perform): inline when the thread is on
     *  it already, otherwise as sync. Never deadlocks on the queue itself. */
    template <class F>
    detail::result_t<F> perform(F&& f) {
        return detail::call_sync("qk_queue_perform", std::forward<F>(f), submit(qk_queue_perform));
    }
    /** perform, reporting the C call's error in `ec`. */
    template <class F>
    detail::ec_result_t<detail::result_t<F>> perform(F&& f, std::error_code& ec) {
        return detail::call_sync(ec, std::forward<F>(f), submit(qk_queue_perform));
    }

    /** Submits a decay-copy of f to run on the queue later (qk_queue_async); returns at once.
     *  Throws std::system_error (EINVAL when empty, ENOTRECOVERABLE in a forked child, ENOMEM)
     *  after destroying the copy. */
    template <class F>
    void async(F&& f) {
        int status = detail::call_async<std::decay_t<F>>(submit(qk_queue_async), std::forward<F>(f));
        if (status != 0) detail::fail(status, status == ENOMEM ? "qk_queue_async (allocation)" : "qk_queue_async");
    }
    /** async, reporting the C call's error in `ec`. */
    template <class F>
    void async(F&& f, std::error_code& ec) {
        detail::set_status(ec, detail::call_async<std::decay_t<F>>(submit(qk_queue_async), std::forward<F>(f)));
    }

    /** Submits a decay-copy of f as a barrier (qk_queue_barrier_async): alone on a concurrent
     *  queue, as async elsewhere. Errors as async. */
    template <class F>
    void barrier_async(F&& f) {
        int status = detail::call_async<std::decay_t<F>>(submit(qk_queue_barrier_async), std::forward<F>(f));
        if (status != 0)
            detail::fail(status, status == ENOMEM ? "qk_queue_barrier_async (allocation)" : "qk_queue_barrier_async");
    }
    /** barrier_async, reporting the C call's error in `ec`. */
    template <class F>
    void barrier_async(F&& f, std::error_code& ec) {
        detail::set_status(ec, detail::call_async<std::decay_t<F>>(submit(qk_queue_barrier_async), std::forward<F>(f)));
    }

    /** The same handle (two empty queues are equal). */
    friend bool operator==(const queue& a, const queue& b) noexcept { return a.handle_ == b.handle_; }
    /** Not the same handle. */
    friend bool operator!=(const queue& a, const queue& b) noexcept { return a.handle_ != b.handle_; }

private:
    /** The C submission `call` on this queue, as call_sync and call_async take it. */
    detail::submitter<qk_queue_t> submit(int (*call)(qk_queue_t*, void*, qk_function_t)) const noexcept {
        return {handle_, call};
    }

    qk_queue_t* handle_ = nullptr;
};

/* ========================================================================================== */
/* qk::db_queue                                                                               */
/* ========================================================================================== */

/** A reentrant reader/writer queue (qk_dbqueue_t): many concurrent readers, one writer, writes in
 *  FIFO order, nested calls never deadlock. Move-only: moves are noexcept, move-assigning
 *  destroys the previous queue, a moved-from db_queue is empty (every call on it is EINVAL). */
class db_queue {
public:
    /** Creates a DB queue (qk_dbqueue_create; `label` may be nullptr, it is copied). Throws
     *  std::system_error (ENOMEM). */
    explicit db_queue(const char* label = nullptr) : handle_(qk_dbqueue_create(label)) {
        if (handle_ == nullptr) detail::fail(detail::creation_status(), "qk_dbqueue_create");
    }
    /** As above; on failure sets `ec` and leaves the DB queue empty. */
    db_queue(const char* label, std::error_code& ec) noexcept : handle_(qk_dbqueue_create(label)) {
        detail::set_status(ec, handle_ == nullptr ? detail::creation_status() : 0);
    }

    db_queue(const db_queue&) = delete;
    db_queue& operator=(const db_queue&) = delete;
    /** Takes over `other`'s queue; `other` becomes empty. */
    db_queue(db_queue&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
    /** Destroys the previous queue (as the destructor does), then takes over `other`'s. */
    db_queue& operator=(db_queue&& other) noexcept {
        if (this != &other) {
            destroy();
            handle_ = std::exchange(other.handle_, nullptr);
        }
        return *this;
    }
    /** Destroys the queue (qk_dbqueue_destroy): waits for blocks on other threads and runs
     *  every pending write first. Inside its own block (EBUSY), or where waiting would close a
     *  cycle (EDEADLK), prints one line and calls std::terminate(). */
    ~db_queue() { destroy(); }

    /** Runs f now, concurrently with other reads, never with a write (qk_dbqueue_read); inline
     *  inside a block of this queue. Returns f's result. Throws std::system_error: EDEADLK (f not
     *  run) when its wait would close a cycle; EINVAL when empty; ENOTRECOVERABLE in a forked
     *  child on a queue that was being written. What f throws is rethrown here. */
    template <class F>
    detail::result_t<F> read(F&& f) const {
        return detail::call_sync("qk_dbqueue_read", std::forward<F>(f), submit(qk_dbqueue_read));
    }
    /** read, reporting the C call's error in `ec`. */
    template <class F>
    detail::ec_result_t<detail::result_t<F>> read(F&& f, std::error_code& ec) const {
        return detail::call_sync(ec, std::forward<F>(f), submit(qk_dbqueue_read));
    }

    /** Runs f now, exclusively (qk_dbqueue_write); inline inside a write. EDEADLK (f not run)
     *  inside a read and no write (the upgrade would deadlock) or when its wait would close a
     *  cycle. Otherwise as read. */
    template <class F>
    detail::result_t<F> write(F&& f) {
        return detail::call_sync("qk_dbqueue_write", std::forward<F>(f), submit(qk_dbqueue_write));
    }
    /** write, reporting the C call's error in `ec`. */
    template <class F>
    detail::ec_result_t<detail::result_t<F>> write(F&& f, std::error_code& ec) {
        return detail::call_sync(ec, std::forward<F>(f), submit(qk_dbqueue_write));
    }

    /** Queues a decay-copy of f to run exclusively, FIFO with all writes
     *  (qk_dbqueue_write_async); returns at once. Throws std::system_error (EINVAL when empty,
     *  ENOTRECOVERABLE in a forked child, ENOMEM) after destroying the copy. */
    template <class F>
    void write_async(F&& f) {
        int status = submit_async<std::decay_t<F>>(std::forward<F>(f));
        if (status != 0)
            detail::fail(status, status == ENOMEM ? "qk_dbqueue_write_async (allocation)" : "qk_dbqueue_write_async");
    }
    /** write_async, reporting the C call's error in `ec`. */
    template <class F>
    void write_async(F&& f, std::error_code& ec) {
        detail::set_status(ec, submit_async<std::decay_t<F>>(std::forward<F>(f)));
    }

    /** Waits until every write submitted before the call has run (qk_dbqueue_flush). Throws
     *  std::system_error: EDEADLK inside a block of this queue or when the wait would close a
     *  cycle; EINVAL when empty. */
    void flush() {
        int status = qk_dbqueue_flush(handle_);
        if (status != 0) detail::fail(status, "qk_dbqueue_flush");
    }
    /** flush, reporting the error in `ec`. */
    void flush(std::error_code& ec) noexcept { detail::set_status(ec, qk_dbqueue_flush(handle_)); }

    /** The queue that stands for this DB queue in identity checks (qk_dbqueue_queue), retained:
     *  inside a read or write it is queue::current(). For identity only: submitting to it is
     *  EINVAL. Empty for an empty DB queue. */
    queue identity_queue() const noexcept { return queue::retain(handle_ ? qk_dbqueue_queue(handle_) : nullptr); }
    /** The C handle (borrowed; nullptr when empty). */
    qk_dbqueue_t* native_handle() const noexcept { return handle_; }

private:
    template <class T>
    friend class guarded;

    /** Submits a heap thunk of type D built from `args` (for guarded<T>). */
    template <class D, class... Args>
    int submit_async(Args&&... args) {
        return detail::call_async<D>(submit(qk_dbqueue_write_async), std::forward<Args>(args)...);
    }
    detail::submitter<qk_dbqueue_t> submit(int (*call)(qk_dbqueue_t*, void*, qk_function_t)) const noexcept {
        return {handle_, call};
    }
    void destroy() noexcept {
        if (handle_ == nullptr) return;
        int status = qk_dbqueue_destroy(handle_);
        if (status != 0) detail::misuse(status, "qk_dbqueue_destroy");
        handle_ = nullptr;
    }

    qk_dbqueue_t* handle_ = nullptr;
};

/* ========================================================================================== */
/* qk::guarded<T>                                                                             */
/* ========================================================================================== */

namespace detail {
/** A write_async callable bound to the guarded value: invokes the decay-copied D with T&. */
template <class D, class T>
struct bound_write {
    T* value;
    D f;
    template <class F>
    bound_write(T& v, F&& fn) : value(&v), f(std::forward<F>(fn)) {}
    void operator()() && { std::invoke(std::move(f), *value); }
};
}  // namespace detail

/** A T that only its DB queue reaches, as folly::Synchronized and Swift's GuardedResource: read
 *  gives f a const T& among other readers, write a T& alone. Not copied or moved. The DB queue
 *  is destroyed before the T (pending writes run first). */
template <class T>
class guarded {
public:
    /** Holds `value`, behind a new DB queue labelled `label` (may be nullptr). Throws
     *  std::system_error (ENOMEM) and what moving T throws. */
    explicit guarded(T value = T(), const char* label = nullptr) : value_(std::move(value)), db_(label) {}
    /** As above; a DB queue that cannot be created sets `ec` and leaves the DB queue empty
     *  (every call EINVAL). */
    guarded(T value, const char* label, std::error_code& ec) : value_(std::move(value)), db_(label, ec) {}

    guarded(const guarded&) = delete;
    guarded& operator=(const guarded&) = delete;

    /** f(const T&) inside a read of the DB queue; returns its result. Errors as db_queue::read. */
    template <class F>
    detail::result_t<F, const T&> read(F&& f) const {
        return db_.read(reader<F>(f));
    }
    /** read, reporting the C call's error in `ec`. */
    template <class F>
    detail::ec_result_t<detail::result_t<F, const T&>> read(F&& f, std::error_code& ec) const {
        return db_.read(reader<F>(f), ec);
    }

    /** f(T&) inside a write of the DB queue; returns its result. Errors as db_queue::write. */
    template <class F>
    detail::result_t<F, T&> write(F&& f) {
        return db_.write(writer<F>(f));
    }
    /** write, reporting the C call's error in `ec`. */
    template <class F>
    detail::ec_result_t<detail::result_t<F, T&>> write(F&& f, std::error_code& ec) {
        return db_.write(writer<F>(f), ec);
    }

    /** A decay-copy of f, run later as f(T&) in a write (db_queue::write_async). */
    template <class F>
    void write_async(F&& f) {
        using D = detail::bound_write<std::decay_t<F>, T>;
        int status = db_.template submit_async<D>(value_, std::forward<F>(f));
        if (status != 0)
            detail::fail(status, status == ENOMEM ? "qk_dbqueue_write_async (allocation)" : "qk_dbqueue_write_async");
    }
    /** write_async, reporting the C call's error in `ec`. */
    template <class F>
    void write_async(F&& f, std::error_code& ec) {
        using D = detail::bound_write<std::decay_t<F>, T>;
        detail::set_status(ec, db_.template submit_async<D>(value_, std::forward<F>(f)));
    }

    /** The DB queue (for flush, identity checks and the C handle). */
    db_queue& db() noexcept { return db_; }
    /** The DB queue (for identity checks and the C handle). */
    const db_queue& db() const noexcept { return db_; }

private:
    template <class F>
    auto reader(F& f) const {
        return [&f, this]() -> decltype(auto) { return std::invoke(static_cast<F&&>(f), std::as_const(value_)); };
    }
    template <class F>
    auto writer(F& f) {
        return [&f, this]() -> decltype(auto) { return std::invoke(static_cast<F&&>(f), value_); };
    }

    T value_;
    db_queue db_;   // after value_: destroyed first, running the pending writes on a live T
};

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
template <class E = std::intptr_t>
class QK_CAPABILITY("mutex") condition_lock {
    static_assert(std::is_trivially_copyable_v<E>, "qk::condition_lock<E>: E must be trivially copyable");
    static_assert(sizeof(E) <= sizeof(std::intptr_t), "qk::condition_lock<E>: E must fit in intptr_t");

public:
    /** The type of the condition. */
    using condition_type = E;

    /** An unlocked lock with the condition E(). */
    condition_lock() noexcept : condition_lock(E()) {}
    /** An unlocked lock with the condition `initial` (qk_condlock_create). */
    explicit condition_lock(E initial) noexcept : handle_(qk_condlock_create(detail::to_condition(initial))) {
        if (handle_ == nullptr) detail::misuse(ENOMEM, "qk_condlock_create");
    }
    condition_lock(const condition_lock&) = delete;
    condition_lock& operator=(const condition_lock&) = delete;
    /** Destroys the lock (qk_condlock_destroy). While it is held (by any thread, this one too)
     *  or waited on, prints one line and calls std::terminate(). */
    ~condition_lock() {
        int status = qk_condlock_destroy(handle_);
        if (status != 0) detail::misuse(status, "qk_condlock_destroy");
    }

    /** Acquires the lock whatever the condition, waiting as needed (qk_condlock_lock). Throws
     *  std::system_error EDEADLK when the caller holds it, or when the wait would close a cycle. */
    void lock() QK_ACQUIRE() { acquired(qk_condlock_lock(handle_), "qk_condlock_lock"); }
    /** lock, reporting the error in `ec`: true when acquired. */
    bool lock(std::error_code& ec) noexcept QK_TRY_ACQUIRE(true) { return acquired(qk_condlock_lock(handle_), ec); }

    /** Returns holding the lock with the condition equal to `c` (qk_condlock_lock_when). Errors
     *  as lock. */
    void lock_when(E c) QK_ACQUIRE() {
        acquired(qk_condlock_lock_when(handle_, detail::to_condition(c)), "qk_condlock_lock_when");
    }
    /** lock_when, reporting the error in `ec`: true when acquired. */
    bool lock_when(E c, std::error_code& ec) noexcept QK_TRY_ACQUIRE(true) {
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
    void set(E c, std::error_code& ec) noexcept QK_EXCLUDES(this) {
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
    bool try_lock() noexcept QK_TRY_ACQUIRE(true) { return acquired(qk_condlock_trylock(handle_)); }
    /** Acquires the lock if it is free with the condition `c` (qk_condlock_trylock_when). */
    bool try_lock_when(E c) noexcept QK_TRY_ACQUIRE(true) {
        return acquired(qk_condlock_trylock_when(handle_, detail::to_condition(c)));
    }
    /** As lock, giving up after `d` (qk_condlock_lock_until); false when it did not acquire. */
    template <class Rep, class Per>
    bool try_lock_for(const std::chrono::duration<Rep, Per>& d) noexcept QK_TRY_ACQUIRE(true) {
        return acquired(qk_condlock_lock_until(handle_, detail::deadline_after(d)));
    }
    /** As lock, giving up at `t` (qk_condlock_lock_until); false when it did not acquire. */
    template <class Clk, class Dur>
    bool try_lock_until(const std::chrono::time_point<Clk, Dur>& t) noexcept QK_TRY_ACQUIRE(true) {
        return acquired(qk_condlock_lock_until(handle_, detail::deadline_at(t)));
    }
    /** As lock_when, giving up after `d` (qk_condlock_lock_when_until). */
    template <class Rep, class Per>
    bool try_lock_when_for(E c, const std::chrono::duration<Rep, Per>& d) noexcept QK_TRY_ACQUIRE(true) {
        return acquired(qk_condlock_lock_when_until(handle_, detail::to_condition(c), detail::deadline_after(d)));
    }
    /** As lock_when, giving up at `t` (qk_condlock_lock_when_until). */
    template <class Clk, class Dur>
    bool try_lock_when_until(E c, const std::chrono::time_point<Clk, Dur>& t) noexcept QK_TRY_ACQUIRE(true) {
        return acquired(qk_condlock_lock_when_until(handle_, detail::to_condition(c), detail::deadline_at(t)));
    }

#if defined(QK_HAVE_CONDITION_TESTS)
    /** Returns holding the lock with pred(condition()) true (qk_condlock_lock_if). `pred`, a
     *  bool(E) callable, runs inside the library on any thread, maybe often: it must be cheap,
     *  never block and read only the condition and data that does not change during the wait
     *  (an exception escaping it calls std::terminate). Errors as lock. */
    template <class P>
    void lock_if(P pred) QK_ACQUIRE() {
        detail::predicate_thunk<E, P> t(pred);
        acquired(qk_condlock_lock_if(handle_, &detail::qk_cxx_test_trampoline, test_context(t)), "qk_condlock_lock_if");
    }
    /** lock_if, reporting the error in `ec`: true when acquired. */
    template <class P>
    bool lock_if(P pred, std::error_code& ec) noexcept QK_TRY_ACQUIRE(true) {
        detail::predicate_thunk<E, P> t(pred);
        return acquired(qk_condlock_lock_if(handle_, &detail::qk_cxx_test_trampoline, test_context(t)), ec);
    }
    /** Acquires the lock if it is free and pred holds (qk_condlock_trylock_if); never waits. */
    template <class P>
    bool try_lock_if(P pred) noexcept QK_TRY_ACQUIRE(true) {
        detail::predicate_thunk<E, P> t(pred);
        return acquired(qk_condlock_trylock_if(handle_, &detail::qk_cxx_test_trampoline, test_context(t)));
    }
    /** As lock_if, giving up after `d` (qk_condlock_lock_if_until). */
    template <class P, class Rep, class Per>
    bool try_lock_if_for(P pred, const std::chrono::duration<Rep, Per>& d) noexcept QK_TRY_ACQUIRE(true) {
        detail::predicate_thunk<E, P> t(pred);
        return acquired(qk_condlock_lock_if_until(handle_, &detail::qk_cxx_test_trampoline, test_context(t),
                                                  detail::deadline_after(d)));
    }
    /** As lock_if, giving up at `t` (qk_condlock_lock_if_until). */
    template <class P, class C, class D>
    bool try_lock_if_until(P pred, const std::chrono::time_point<C, D>& tp) noexcept QK_TRY_ACQUIRE(true) {
        detail::predicate_thunk<E, P> t(pred);
        return acquired(qk_condlock_lock_if_until(handle_, &detail::qk_cxx_test_trampoline, test_context(t),
                                                  detail::deadline_at(tp)));
    }

    /** The holder waits until pred(condition()) holds (qk_condlock_await), the shape of
     *  std::condition_variable::wait(lock, pred): returns at once when it holds already;
     *  otherwise releases the lock (handing it to the first waiter the condition satisfies),
     *  waits, and returns holding it with pred true. Only the waiter whose predicate holds is
     *  woken. Called without the lock: one line on stderr, then std::terminate(). Throws
     *  std::system_error EDEADLK when the wait would close a cycle. */
    template <class P>
    void await(P pred) QK_REQUIRES(this) {
        detail::predicate_thunk<E, P> t(pred);
        int status = qk_condlock_await(handle_, &detail::qk_cxx_test_trampoline, test_context(t));
        if (status == EPERM) detail::misuse(status, "qk_condlock_await");
        acquired(status, "qk_condlock_await");
    }
    /** await, reporting the error in `ec` (without the lock: std::terminate as above). */
    template <class P>
    void await(P pred, std::error_code& ec) noexcept QK_REQUIRES(this) {
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
    bool await_for(P pred, const std::chrono::duration<Rep, Per>& d) noexcept QK_REQUIRES(this) {
        return await_deadline(pred, detail::deadline_after(d));
    }
    /** As await_for, giving up at `t`. */
    template <class P, class C, class D>
    bool await_until(P pred, const std::chrono::time_point<C, D>& t) noexcept QK_REQUIRES(this) {
        return await_deadline(pred, detail::deadline_at(t));
    }
#endif

    /** The current condition, read without a race and without waiting (qk_condlock_condition). */
    E condition() const noexcept { return detail::from_condition<E>(qk_condlock_condition(handle_)); }
    /** True while the calling thread holds the lock and acquired it from a holder that exited
     *  holding it (qk_condlock_owner_died): the data it guards may be half-updated. */
    bool owner_died() const noexcept { return qk_condlock_owner_died(handle_) == 1; }
    /** The C handle (borrowed), for names, stats and diagnostics. */
    qk_condlock_t* native_handle() const noexcept { return handle_; }

private:
    /** An acquisition's status as a bool; EOWNERDEAD acquired too. */
    static bool acquired(int status) noexcept { return status == 0 || status == EOWNERDEAD; }
    static void acquired(int status, const char* call) {
        if (!acquired(status)) detail::fail(status, call);
    }
    static bool acquired(int status, std::error_code& ec) noexcept {
        bool held = acquired(status);
        detail::set_status(ec, held ? 0 : status);
        return held;
    }
#if defined(QK_HAVE_CONDITION_TESTS)
    static void* test_context(const detail::test_thunk& t) noexcept {
        return const_cast<void*>(static_cast<const void*>(&t));
    }
    template <class P>
    bool await_deadline(P& pred, std::uint64_t deadline) noexcept {
        detail::predicate_thunk<E, P> t(pred);
        int status = qk_condlock_await_until(handle_, &detail::qk_cxx_test_trampoline, test_context(t), deadline);
        if (status == 0 || status == EOWNERDEAD) return true;
        if (status == ETIMEDOUT) return false;
        detail::misuse(status, "qk_condlock_await_until");
    }
#endif

    qk_condlock_t* handle_;
};

/** CTAD: qk::condition_lock l{state::idle}; is a condition_lock<state>. */
template <class E>
condition_lock(E) -> condition_lock<E>;

}  // namespace qk

#endif /* QUEUEKIT_HPP */
