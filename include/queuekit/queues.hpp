// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers
/*
 * queuekit/queues.hpp — qk::queue, qk::db_queue and qk::guarded<T>.
 * A part of <queuekit.hpp>: include that header, not this one.
 */
#ifndef QUEUEKIT_QUEUES_HPP
#define QUEUEKIT_QUEUES_HPP

#ifndef QUEUEKIT_HPP
#error "include <queuekit.hpp>, not <queuekit/queues.hpp>"
#endif

namespace qk {

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
    explicit queue(const char *label, qk_queue_kind_t kind = QK_QUEUE_SERIAL)
        : handle_(qk_queue_create(label, kind)) {
        if (handle_ == nullptr) detail::fail(detail::creation_status(), "qk_queue_create");
    }

    /** As above; on failure sets `ec` and leaves the queue empty. */
    queue(const char *label, qk_queue_kind_t kind, std::error_code &ec) noexcept
        : handle_(qk_queue_create(label, kind)) {
        detail::set_status(ec, handle_ == nullptr ? detail::creation_status() : 0);
    }

    /** Creates a queue whose blocks run on `target` (qk_queue_create_with_target; an empty
     *  target is none). Throws std::system_error (EINVAL for a bad kind or an identity-only
     *  target, ENOMEM). */
    queue(const char *label, qk_queue_kind_t kind, const queue &target)
        : handle_(qk_queue_create_with_target(label, kind, target.handle_)) {
        if (handle_ == nullptr)
            detail::fail(detail::creation_status(), "qk_queue_create_with_target");
    }

    /** As above; on failure sets `ec` and leaves the queue empty. */
    queue(const char *label, qk_queue_kind_t kind, const queue &target,
          std::error_code &ec) noexcept
        : handle_(qk_queue_create_with_target(label, kind, target.handle_)) {
        detail::set_status(ec, handle_ == nullptr ? detail::creation_status() : 0);
    }

    /** Another reference to the same queue. */
    queue(const queue &other) noexcept : handle_(qk_queue_retain(other.handle_)) {}
    /** Takes `other`'s reference; `other` becomes empty. */
    queue(queue &&other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
    /** Refers to `other`'s queue (releasing the previous one). */
    queue &operator=(const queue &other) noexcept {
        qk_queue_t *previous = std::exchange(handle_, qk_queue_retain(other.handle_));
        qk_queue_release(previous);
        return *this;
    }
    /** Takes `other`'s reference (releasing the previous one); `other` becomes empty. */
    queue &operator=(queue &&other) noexcept {
        if (this != &other) {
            qk_queue_release(handle_);
            handle_ = std::exchange(other.handle_, nullptr);
        }
        return *this;
    }
    /** Releases the reference (the queue lives on while blocks are pending). */
    ~queue() {
        qk_queue_release(handle_);
    }

    /** The main queue (qk_queue_main). */
    static queue main() noexcept {
        return adopt(qk_queue_main());
    }
    /** The global concurrent queue of a QoS class; empty for a bad class. */
    static queue global(qk_qos_t qos = QK_QOS_DEFAULT) noexcept {
        return adopt(qk_queue_global(qos));
    }
    /** The queue whose block the calling thread runs (qk_queue_current), retained; empty
     *  outside any queue. */
    static queue current() noexcept {
        return retain(qk_queue_current());
    }
    /** A queue value for `q` that adds a reference (the caller keeps its own). */
    static queue retain(qk_queue_t *q) noexcept {
        return adopt(qk_queue_retain(q));
    }
    /** A queue value for `q` that takes over the caller's reference (released by its
     *  destructor). */
    static queue adopt(qk_queue_t *q) noexcept {
        queue result;
        result.handle_ = q;
        return result;
    }

    /** The C handle (borrowed; nullptr when empty). */
    qk_queue_t *native_handle() const noexcept {
        return handle_;
    }
    /** Whether the queue is not empty. */
    explicit operator bool() const noexcept {
        return handle_ != nullptr;
    }
    /** The label (qk_queue_label): "" when anonymous or empty; valid as long as the queue. */
    const char *label() const noexcept {
        return qk_queue_label(handle_);
    }
    /** Whether this queue is the current queue or one of its targets (qk_queue_is_current). */
    bool is_current() const noexcept {
        return qk_queue_is_current(handle_);
    }
    /** Whether the predicate holds for the calling thread (qk_queue_check(...) == 0). */
    bool check(qk_predicate_t p = QK_ON_QUEUE) const noexcept {
        return qk_queue_check(handle_, p) == 0;
    }
    /** Aborts with one line on stderr unless the predicate holds (qk_queue_precondition). */
    void precondition(qk_predicate_t p = QK_ON_QUEUE) const noexcept {
        qk_queue_precondition(handle_, p);
    }

    /** Runs f on the queue and waits for it (qk_queue_sync); returns its result. Throws
     *  std::system_error: EDEADLK (f not run) where dispatch would deadlock, e.g. onto the
     *  serial queue the thread is running; EINVAL when empty; ENOTRECOVERABLE in a forked child.
     *  What f throws is rethrown here. */
    template <class F> detail::result_t<F> sync(F &&f) {
        return detail::call_sync("qk_queue_sync", std::forward<F>(f), submit(qk_queue_sync));
    }
    /** sync, reporting the C call's error in `ec`: std::optional of the result (void for void). */
    template <class F> detail::ec_result_t<detail::result_t<F>> sync(F &&f, std::error_code &ec) {
        return detail::call_sync(ec, std::forward<F>(f), submit(qk_queue_sync));
    }

    /** Runs f as a barrier and waits for it (qk_queue_barrier_sync): alone on a concurrent
     *  queue. EDEADLK when the thread runs any block of this queue. Otherwise as sync. */
    template <class F> detail::result_t<F> barrier_sync(F &&f) {
        return detail::call_sync("qk_queue_barrier_sync", std::forward<F>(f),
                                 submit(qk_queue_barrier_sync));
    }
    /** barrier_sync, reporting the C call's error in `ec`. */
    template <class F>
    detail::ec_result_t<detail::result_t<F>> barrier_sync(F &&f, std::error_code &ec) {
        return detail::call_sync(ec, std::forward<F>(f), submit(qk_queue_barrier_sync));
    }

    /** Runs f on the queue now, the safe way (qk_queue_perform): inline when the thread is on
     *  it already, otherwise as sync. Never deadlocks on the queue itself. */
    template <class F> detail::result_t<F> perform(F &&f) {
        return detail::call_sync("qk_queue_perform", std::forward<F>(f), submit(qk_queue_perform));
    }
    /** perform, reporting the C call's error in `ec`. */
    template <class F>
    detail::ec_result_t<detail::result_t<F>> perform(F &&f, std::error_code &ec) {
        return detail::call_sync(ec, std::forward<F>(f), submit(qk_queue_perform));
    }

    /** Submits a decay-copy of f to run on the queue later (qk_queue_async); returns at once.
     *  Throws std::system_error (EINVAL when empty, ENOTRECOVERABLE in a forked child, ENOMEM)
     *  after destroying the copy. */
    template <class F> void async(F &&f) {
        int status =
            detail::call_async<std::decay_t<F>>(submit(qk_queue_async), std::forward<F>(f));
        if (status != 0)
            detail::fail(status,
                         status == ENOMEM ? "qk_queue_async (allocation)" : "qk_queue_async");
    }
    /** async, reporting the C call's error in `ec`. */
    template <class F> void async(F &&f, std::error_code &ec) {
        detail::set_status(
            ec, detail::call_async<std::decay_t<F>>(submit(qk_queue_async), std::forward<F>(f)));
    }

    /** Submits a decay-copy of f as a barrier (qk_queue_barrier_async): alone on a concurrent
     *  queue, as async elsewhere. Errors as async. */
    template <class F> void barrier_async(F &&f) {
        int status =
            detail::call_async<std::decay_t<F>>(submit(qk_queue_barrier_async), std::forward<F>(f));
        if (status != 0)
            detail::fail(status, status == ENOMEM ? "qk_queue_barrier_async (allocation)"
                                                  : "qk_queue_barrier_async");
    }
    /** barrier_async, reporting the C call's error in `ec`. */
    template <class F> void barrier_async(F &&f, std::error_code &ec) {
        detail::set_status(ec, detail::call_async<std::decay_t<F>>(submit(qk_queue_barrier_async),
                                                                   std::forward<F>(f)));
    }

    /** The same handle (two empty queues are equal). */
    friend bool operator==(const queue &a, const queue &b) noexcept {
        return a.handle_ == b.handle_;
    }
    /** Not the same handle. */
    friend bool operator!=(const queue &a, const queue &b) noexcept {
        return a.handle_ != b.handle_;
    }

  private:
    /** The C submission `call` on this queue, as call_sync and call_async take it. */
    detail::submitter<qk_queue_t> submit(int (*call)(qk_queue_t *, void *,
                                                     qk_function_t)) const noexcept {
        return {handle_, call};
    }

    qk_queue_t *handle_ = nullptr;
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
    explicit db_queue(const char *label = nullptr) : handle_(qk_dbqueue_create(label)) {
        if (handle_ == nullptr) detail::fail(detail::creation_status(), "qk_dbqueue_create");
    }
    /** As above; on failure sets `ec` and leaves the DB queue empty. */
    db_queue(const char *label, std::error_code &ec) noexcept : handle_(qk_dbqueue_create(label)) {
        detail::set_status(ec, handle_ == nullptr ? detail::creation_status() : 0);
    }

    db_queue(const db_queue &) = delete;
    db_queue &operator=(const db_queue &) = delete;
    /** Takes over `other`'s queue; `other` becomes empty. */
    db_queue(db_queue &&other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
    /** Destroys the previous queue (as the destructor does), then takes over `other`'s. */
    db_queue &operator=(db_queue &&other) noexcept {
        if (this != &other) {
            destroy();
            handle_ = std::exchange(other.handle_, nullptr);
        }
        return *this;
    }
    /** Destroys the queue (qk_dbqueue_destroy): waits for blocks on other threads and runs
     *  every pending write first. Inside its own block (EBUSY), or where waiting would close a
     *  cycle (EDEADLK), prints one line and calls std::terminate(). */
    ~db_queue() {
        destroy();
    }

    /** Runs f now, concurrently with other reads, never with a write (qk_dbqueue_read); inline
     *  inside a block of this queue. Returns f's result. Throws std::system_error: EDEADLK (f not
     *  run) when its wait would close a cycle; EINVAL when empty; ENOTRECOVERABLE in a forked
     *  child on a queue that was being written. What f throws is rethrown here. */
    template <class F> detail::result_t<F> read(F &&f) const {
        return detail::call_sync("qk_dbqueue_read", std::forward<F>(f), submit(qk_dbqueue_read));
    }
    /** read, reporting the C call's error in `ec`. */
    template <class F>
    detail::ec_result_t<detail::result_t<F>> read(F &&f, std::error_code &ec) const {
        return detail::call_sync(ec, std::forward<F>(f), submit(qk_dbqueue_read));
    }

    /** Runs f now, exclusively (qk_dbqueue_write); inline inside a write. EDEADLK (f not run)
     *  inside a read and no write (the upgrade would deadlock) or when its wait would close a
     *  cycle. Otherwise as read. */
    template <class F> detail::result_t<F> write(F &&f) {
        return detail::call_sync("qk_dbqueue_write", std::forward<F>(f), submit(qk_dbqueue_write));
    }
    /** write, reporting the C call's error in `ec`. */
    template <class F> detail::ec_result_t<detail::result_t<F>> write(F &&f, std::error_code &ec) {
        return detail::call_sync(ec, std::forward<F>(f), submit(qk_dbqueue_write));
    }

    /** Queues a decay-copy of f to run exclusively, FIFO with all writes
     *  (qk_dbqueue_write_async); returns at once. Throws std::system_error (EINVAL when empty,
     *  ENOTRECOVERABLE in a forked child, ENOMEM) after destroying the copy. */
    template <class F> void write_async(F &&f) {
        int status = submit_async<std::decay_t<F>>(std::forward<F>(f));
        if (status != 0)
            detail::fail(status, status == ENOMEM ? "qk_dbqueue_write_async (allocation)"
                                                  : "qk_dbqueue_write_async");
    }
    /** write_async, reporting the C call's error in `ec`. */
    template <class F> void write_async(F &&f, std::error_code &ec) {
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
    void flush(std::error_code &ec) noexcept {
        detail::set_status(ec, qk_dbqueue_flush(handle_));
    }

    /** The queue that stands for this DB queue in identity checks (qk_dbqueue_queue), retained:
     *  inside a read or write it is queue::current(). For identity only: submitting to it is
     *  EINVAL. Empty for an empty DB queue. */
    queue identity_queue() const noexcept {
        return queue::retain(handle_ ? qk_dbqueue_queue(handle_) : nullptr);
    }
    /** The C handle (borrowed; nullptr when empty). */
    qk_dbqueue_t *native_handle() const noexcept {
        return handle_;
    }

  private:
    template <class T> friend class guarded;

    /** Submits a heap thunk of type D built from `args` (for guarded<T>). */
    template <class D, class... Args> int submit_async(Args &&...args) {
        return detail::call_async<D>(submit(qk_dbqueue_write_async), std::forward<Args>(args)...);
    }
    detail::submitter<qk_dbqueue_t> submit(int (*call)(qk_dbqueue_t *, void *,
                                                       qk_function_t)) const noexcept {
        return {handle_, call};
    }
    void destroy() noexcept {
        if (handle_ == nullptr) return;
        int status = qk_dbqueue_destroy(handle_);
        if (status != 0) detail::misuse(status, "qk_dbqueue_destroy");
        handle_ = nullptr;
    }

    qk_dbqueue_t *handle_ = nullptr;
};

/* ========================================================================================== */
/* qk::guarded<T>                                                                             */
/* ========================================================================================== */

namespace detail {
/** A write_async callable bound to the guarded value: invokes the decay-copied D with T&. */
template <class D, class T> struct bound_write {
    T *value;
    D f;
    template <class F> bound_write(T &v, F &&fn) : value(&v), f(std::forward<F>(fn)) {}
    void operator()() && {
        std::invoke(std::move(f), *value);
    }
};
} // namespace detail

/** A T that only its DB queue reaches, as folly::Synchronized and Swift's GuardedResource: read
 *  gives f a const T& among other readers, write a T& alone. Not copied or moved. The DB queue
 *  is destroyed before the T (pending writes run first). */
template <class T> class guarded {
  public:
    /** Holds `value`, behind a new DB queue labelled `label` (may be nullptr). Throws
     *  std::system_error (ENOMEM) and what moving T throws. */
    explicit guarded(T value = T(), const char *label = nullptr)
        : value_(std::move(value)), db_(label) {}
    /** As above; a DB queue that cannot be created sets `ec` and leaves the DB queue empty
     *  (every call EINVAL). */
    guarded(T value, const char *label, std::error_code &ec)
        : value_(std::move(value)), db_(label, ec) {}

    guarded(const guarded &) = delete;
    guarded &operator=(const guarded &) = delete;

    /** f(const T&) inside a read of the DB queue; returns its result. Errors as db_queue::read. */
    template <class F> detail::result_t<F, const T &> read(F &&f) const {
        return db_.read(reader<F>(f));
    }
    /** read, reporting the C call's error in `ec`. */
    template <class F>
    detail::ec_result_t<detail::result_t<F, const T &>> read(F &&f, std::error_code &ec) const {
        return db_.read(reader<F>(f), ec);
    }

    /** f(T&) inside a write of the DB queue; returns its result. Errors as db_queue::write. */
    template <class F> detail::result_t<F, T &> write(F &&f) {
        return db_.write(writer<F>(f));
    }
    /** write, reporting the C call's error in `ec`. */
    template <class F>
    detail::ec_result_t<detail::result_t<F, T &>> write(F &&f, std::error_code &ec) {
        return db_.write(writer<F>(f), ec);
    }

    /** A decay-copy of f, run later as f(T&) in a write (db_queue::write_async). */
    template <class F> void write_async(F &&f) {
        using D = detail::bound_write<std::decay_t<F>, T>;
        int status = db_.template submit_async<D>(value_, std::forward<F>(f));
        if (status != 0)
            detail::fail(status, status == ENOMEM ? "qk_dbqueue_write_async (allocation)"
                                                  : "qk_dbqueue_write_async");
    }
    /** write_async, reporting the C call's error in `ec`. */
    template <class F> void write_async(F &&f, std::error_code &ec) {
        using D = detail::bound_write<std::decay_t<F>, T>;
        detail::set_status(ec, db_.template submit_async<D>(value_, std::forward<F>(f)));
    }

    /** The DB queue (for flush, identity checks and the C handle). */
    db_queue &db() noexcept {
        return db_;
    }
    /** The DB queue (for identity checks and the C handle). */
    const db_queue &db() const noexcept {
        return db_;
    }

  private:
    template <class F> auto reader(F &f) const {
        return [&f, this]() -> decltype(auto) {
            return std::invoke(static_cast<F &&>(f), std::as_const(value_));
        };
    }
    template <class F> auto writer(F &f) {
        return [&f, this]() -> decltype(auto) { return std::invoke(static_cast<F &&>(f), value_); };
    }

    T value_;
    db_queue db_; // after value_: destroyed first, running the pending writes on a live T
};

} // namespace qk

#endif /* QUEUEKIT_QUEUES_HPP */
