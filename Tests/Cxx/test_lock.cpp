// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers
// qk::condition_lock<E>: conditions of every kind, the standard lock concepts, deadlines on any
// clock, owner_died, refusals, and the misuse that terminates.
#include <queuekit.hpp>

#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "check.hpp"

namespace {
enum class stage { idle, loaded, done };
struct point {
    std::int16_t x, y;
};
using namespace std::chrono_literals;
using std::chrono::steady_clock;
using std::chrono::system_clock;

/** Waits (bounded) until some thread waits inside QueueKit: the wait report is not empty. */
bool someone_waits() {
    for (auto until = steady_clock::now() + 20s; steady_clock::now() < until;
         std::this_thread::yield()) {
        if (qk_copy_wait_report(nullptr, 0) > 0) return true;
    }
    return false;
}
} // namespace

static_assert(noexcept(std::declval<qk::condition_lock<> &>().unlock()));
static_assert(noexcept(std::declval<qk::condition_lock<> &>().unlock_with(0)));
static_assert(noexcept(std::declval<qk::condition_lock<> &>().try_lock()));
static_assert(noexcept(std::declval<qk::condition_lock<> &>().try_lock_for(
    std::declval<const std::chrono::seconds &>())));
static_assert(
    noexcept(std::declval<qk::condition_lock<> &>().lock(std::declval<std::error_code &>())));
static_assert(
    noexcept(std::declval<qk::condition_lock<> &>().set(0, std::declval<std::error_code &>())));
static_assert(!std::is_copy_constructible_v<qk::condition_lock<>> &&
              !std::is_move_constructible_v<qk::condition_lock<>>);
static_assert(std::is_nothrow_default_constructible_v<qk::condition_lock<stage>>);

TEST(conditions_of_every_kind) {
    qk::condition_lock l{stage::idle}; // CTAD
    static_assert(std::is_same_v<decltype(l), qk::condition_lock<stage>>);
    static_assert(std::is_same_v<qk::condition_lock<>::condition_type, std::intptr_t>);
    CHECK(l.condition() == stage::idle);
    l.set(stage::loaded);
    CHECK(l.condition() == stage::loaded);
    CHECK(qk_condlock_condition(l.native_handle()) == 1);
    l.lock_when(stage::loaded);
    l.unlock_with(stage::done);
    CHECK(!l.try_lock_when(stage::idle));
    CHECK(l.try_lock_when(stage::done));
    l.unlock();
    qk::condition_lock<int> i(-5);
    CHECK(i.condition() == -5);
    i.set(7);
    CHECK(i.try_lock_when(7));
    i.unlock_with(-1);
    CHECK(qk_condlock_condition(i.native_handle()) == -1);
    qk::condition_lock b{true};
    static_assert(std::is_same_v<decltype(b), qk::condition_lock<bool>>);
    CHECK(b.condition());
    b.set(false);
    CHECK(!b.condition() && b.try_lock_when(false));
    b.unlock();
    qk::condition_lock p{point{3, -4}};
    CHECK(p.condition().x == 3 && p.condition().y == -4);
    p.set(point{1, 2});
    CHECK(p.try_lock_when(point{1, 2}) && !p.try_lock_when(point{1, 2}));
    p.unlock();
    qk::condition_lock<> plain;
    CHECK(plain.condition() == 0);
    std::error_code ec;
    plain.set(9, ec);
    CHECK(!ec && plain.condition() == 9);
}

TEST(lockable_and_timed_lockable) {
    qk::condition_lock<int> l(0);
    {
        std::lock_guard<qk::condition_lock<int>> guard(l);
        CHECK(qk_condlock_check_held(l.native_handle()) == 0);
        CHECK(!l.try_lock()); // held by the caller
    }
    CHECK(qk_condlock_check_held(l.native_handle()) == EPERM);
    {
        std::unique_lock<qk::condition_lock<int>> ul(l, 50ms);
        CHECK(ul.owns_lock());
        ul.unlock();
        CHECK(ul.try_lock_until(steady_clock::now() + 1s));
    }
    {
        std::unique_lock<qk::condition_lock<int>> ul(l, std::try_to_lock);
        CHECK(ul.owns_lock());
    }
#if QK_CXX_EXCEPTIONS
    l.lock();
    CHECK_THROWS_STATUS(l.lock(), EDEADLK, "qk_condlock_lock");
    CHECK_THROWS_STATUS(l.lock_when(0), EDEADLK, "qk_condlock_lock_when");
    CHECK_THROWS_STATUS(l.set(1), EDEADLK, "qk_condlock_set");
    l.unlock();
#endif
    std::error_code ec;
    CHECK(l.lock(ec) && !ec);
    CHECK(!l.lock(ec) && ec.value() == EDEADLK);
    CHECK(!l.lock_when(0, ec) && ec.value() == EDEADLK);
    l.set(3, ec);
    CHECK(ec.value() == EDEADLK);
    l.unlock();
    CHECK(l.lock_when(0, ec) && !ec);
    l.unlock();
}

TEST(scoped_lock_of_two_locks) {
    qk::condition_lock<> a, b;
    long counter = 0;
    std::thread other([&] {
        for (int i = 0; i < 5000; ++i) {
            std::scoped_lock both(b, a);
            ++counter;
        }
    });
    for (int i = 0; i < 5000; ++i) {
        std::scoped_lock both(a, b);
        ++counter;
    }
    other.join();
    CHECK(counter == 10000);
    std::lock(a, b);
    CHECK(qk_condlock_check_held(a.native_handle()) == 0 &&
          qk_condlock_check_held(b.native_handle()) == 0);
    a.unlock();
    b.unlock();
}

TEST(handing_over_between_threads) {
    qk::condition_lock l{stage::idle};
    std::vector<int> log;
    std::thread loader([&] {
        l.lock_when(stage::idle);
        log.push_back(1);
        l.unlock_with(stage::loaded);
    });
    std::thread finisher([&] {
        l.lock_when(stage::loaded);
        log.push_back(2);
        l.unlock_with(stage::done);
    });
    CHECK(l.try_lock_when_for(stage::done, 20s));
    CHECK(log == (std::vector<int>{1, 2}));
    l.unlock();
    loader.join();
    finisher.join();
}

TEST(deadlines) {
    qk::condition_lock<int> l(0);
    check::signal held, release;
    std::thread holder([&] {
        l.lock();
        held.notify();
        release.wait();
        l.unlock();
    });
    CHECK(held.wait());
    // never before the deadline, on any clock
    auto start = steady_clock::now();
    CHECK(!l.try_lock_for(30ms));
    CHECK(steady_clock::now() - start >= 30ms);
    start = steady_clock::now();
    CHECK(!l.try_lock_until(steady_clock::now() + 20ms));
    CHECK(steady_clock::now() - start >= 20ms);
    auto wall = system_clock::now();
    start = steady_clock::now();
    CHECK(!l.try_lock_until(wall + 20ms));
    CHECK(steady_clock::now() - start >= 19ms); // system_clock's own resolution may round
    CHECK(!l.try_lock_when_for(0, 10ms));
    CHECK(!l.try_lock_when_until(0, system_clock::now() + 5ms));
    // past and zero: try once
    CHECK(!l.try_lock_for(0s) && !l.try_lock_for(-5s));
    CHECK(!l.try_lock_until(steady_clock::time_point{}) &&
          !l.try_lock_until(system_clock::now() - 1h));
    CHECK(!l.try_lock_for(std::chrono::duration<double, std::milli>(1.5)));
    release.notify();
    // max(): untimed, it waits for the release
    CHECK(l.try_lock_for(std::chrono::nanoseconds::max()));
    l.unlock();
    holder.join();
    CHECK(l.try_lock_until(steady_clock::time_point::max()));
    l.unlock();
    CHECK(l.try_lock_until(system_clock::now() - 1s)); // free: the one try succeeds
    l.unlock();
}

TEST(deadline_conversion) {
    using qk::detail::deadline_after;
    using qk::detail::deadline_at;
    CHECK(deadline_after(std::chrono::nanoseconds::max()) == QK_FOREVER);
    CHECK(deadline_after(std::chrono::hours::max()) == QK_FOREVER);
    CHECK(deadline_at(steady_clock::time_point::max()) == QK_FOREVER);
    CHECK(deadline_at(system_clock::time_point::max()) == QK_FOREVER);
    // overflow saturates, still timed
    CHECK(deadline_after(std::chrono::hours::max() - std::chrono::hours(1)) == QK_FOREVER - 1);
    CHECK(deadline_after(std::chrono::nanoseconds::max() - std::chrono::nanoseconds(1)) ==
          QK_FOREVER - 1);
    CHECK(deadline_after(std::chrono::duration<double>(1e300)) == QK_FOREVER - 1);
    CHECK(deadline_at(system_clock::time_point::max() - std::chrono::hours(1)) == QK_FOREVER - 1);
    CHECK(deadline_at(std::chrono::time_point<system_clock, std::chrono::hours>::max() -
                      std::chrono::hours(1)) == QK_FOREVER - 1);
    CHECK(deadline_at(steady_clock::time_point::max() - std::chrono::nanoseconds(1)) ==
              static_cast<std::uint64_t>(INT64_MAX) - 1 ||
          deadline_at(steady_clock::time_point::max() - std::chrono::nanoseconds(1)) ==
              QK_FOREVER - 1);
    // past: 0 (tries once)
    CHECK(deadline_after(std::chrono::seconds(0)) == 0 &&
          deadline_after(std::chrono::seconds(-1)) == 0);
    CHECK(deadline_at(system_clock::time_point::min()) == 0);
    CHECK(deadline_at(steady_clock::time_point::min()) == 0);
    // steady_clock is CLOCK_MONOTONIC, used as it is
    auto t = steady_clock::now() + 5s;
    CHECK(deadline_at(t) ==
          static_cast<std::uint64_t>(
              std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count()));
    // rounding up: never early
    using qk::detail::positive_ns;
    CHECK(positive_ns(std::chrono::duration<double, std::nano>(0.25)) == 1);
    CHECK(positive_ns(std::chrono::duration<double, std::nano>(2.0)) == 2);
    CHECK(positive_ns(std::chrono::duration<long long, std::pico>(1500)) == 2);
    CHECK(positive_ns(std::chrono::duration<long long, std::pico>(2000)) == 2);
    CHECK(positive_ns(std::chrono::microseconds(3)) == 3000);
    CHECK(positive_ns(std::chrono::duration<long long, std::ratio<1, 3>>(1)) == 333333334);
    std::uint64_t now = qk_now_ns();
    std::uint64_t in_1s = deadline_after(1s);
    CHECK(in_1s >= now + 1000000000u && in_1s < qk_now_ns() + 1000000000u + 1);
    auto soon = deadline_at(system_clock::now() + 2s);
    CHECK(soon >= now + 1999000000u && soon <= qk_now_ns() + 2001000000u);
}

TEST(owner_died_after_a_holder_exits) {
    qk::condition_lock<int> l(4);
    std::thread([&] { l.lock(); }).join(); // exits holding it
    CHECK(!l.owner_died());
    l.lock(); // EOWNERDEAD is no error
    CHECK(l.owner_died());
    CHECK(qk_condlock_owner_died(l.native_handle()) == 1);
    CHECK(l.condition() == 4);
    l.unlock();
    CHECK(!l.owner_died());
    CHECK(l.try_lock() && !l.owner_died());
    l.unlock();
    std::thread([&] { l.lock_when(4); }).join();
    CHECK(l.try_lock_when(4) && l.owner_died());
    l.unlock_with(5);
    std::thread([&] { l.lock(); }).join();
    std::error_code ec;
    CHECK(l.lock(ec) && !ec && l.owner_died());
    std::thread([&] { CHECK(!l.owner_died()); }).join(); // other threads are not told
    l.unlock();
    CHECK(qk_condlock_owner_died(nullptr) == 0);
}

TEST(refused_untimed_waits) {
    qk::condition_lock<> a, b;
    check::signal b_held;
    std::atomic<bool> refused_there{false};
    a.lock(); // before the other thread can reach it
    std::thread other([&] {
        b.lock();
        b_held.notify();
        std::error_code ec;
        if (a.lock(ec))
            a.unlock();
        else
            refused_there = ec.value() == EDEADLK;
        b.unlock();
    });
    CHECK(b_held.wait());
    CHECK(someone_waits()); // the other thread waits for a
    // closing the ring: refused, like a timeout for try_*, EDEADLK for the others
    CHECK(!b.try_lock_for(std::chrono::seconds::max()));
    std::error_code ec;
    CHECK(!b.lock(ec) && ec.value() == EDEADLK);
#if QK_CXX_EXCEPTIONS
    CHECK_THROWS_STATUS(b.lock(), EDEADLK, "qk_condlock_lock");
#endif
    a.unlock();
    other.join();
    CHECK(!refused_there);
}

CHILD(unlock_not_held) {
    qk::condition_lock<> l;
    l.unlock();
}
CHILD(unlock_with_not_held) {
    qk::condition_lock<int> l;
    l.unlock_with(3);
}
CHILD(destroy_held) {
    qk::condition_lock<> l;
    l.lock();
}
CHILD(destroy_held_elsewhere) {
    auto *l = new qk::condition_lock<>;
    std::thread([l] { l->lock(); }).join(); // abandoned: still held
    check::signal locked;
    std::thread holder([l, &locked] {
        l->lock();
        locked.notify();
        check::signal().wait(std::chrono::seconds(20));
    });
    locked.wait();
    delete l;
}

TEST(misuse_terminates_with_one_line) {
    CHECK(check::dies_with("unlock_not_held", "qk_condlock_unlock: EPERM"));
    CHECK(check::dies_with("unlock_with_not_held", "qk_condlock_unlock_with: EPERM"));
    CHECK(check::dies_with("destroy_held", "qk_condlock_destroy: EBUSY"));
    CHECK(check::dies_with("destroy_held_elsewhere", "qk_condlock_destroy: EBUSY"));
}

CHECK_MAIN
