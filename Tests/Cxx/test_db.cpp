// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers
// qk::db_queue and qk::guarded<T>: results, nesting, exceptions carried back, write_async
// lifetimes, moves, and guarded<T> under concurrency.
#include <queuekit.hpp>

#include <atomic>
#include <map>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "check.hpp"

namespace {
struct tracker {
    std::atomic<int> *destroyed;
    std::thread::id *destroyed_on;
    std::thread::id *ran_on;
    check::signal *done;
    bool live = true;
    tracker(std::atomic<int> *d, std::thread::id *on, std::thread::id *ran, check::signal *s)
        : destroyed(d), destroyed_on(on), ran_on(ran), done(s) {}
    tracker(tracker &&o) noexcept
        : destroyed(o.destroyed), destroyed_on(o.destroyed_on), ran_on(o.ran_on), done(o.done),
          live(std::exchange(o.live, false)) {}
    ~tracker() {
        if (!live) return;
        *destroyed_on = std::this_thread::get_id();
        ++*destroyed;
        if (done) done->notify();
    }
    void operator()() && {
        *ran_on = std::this_thread::get_id();
    }
    void operator()(int &v) && {
        *ran_on = std::this_thread::get_id();
        ++v;
    }
};
} // namespace

TEST(db_queue_results_and_nesting) {
    qk::db_queue db("cxx.db");
    CHECK(db.native_handle() != nullptr);
    int value = 0;
    db.write([&] { value = 1; });
    CHECK(db.read([&] { return value; }) == 1);
    CHECK(*db.read([] { return std::make_unique<int>(2); }) == 2);
    CHECK(*db.write([] { return std::make_unique<int>(3); }) == 3);
    // nested: a read inside a write, a write inside a write, inline
    int nested =
        db.write([&] { return db.read([&] { return db.write([&] { return value + 10; }); }); });
    CHECK(nested == 11);
    // identity: inside a read the DB queue's queue is current
    qk::queue identity = db.identity_queue();
    CHECK(identity && !identity.is_current());
    db.read([&] { CHECK(qk::queue::current() == identity && identity.check()); });
    db.write([&] { CHECK(identity.check(QK_ON_QUEUE_AS_BARRIER)); });
    std::error_code ec;
    identity.sync([] {}, ec);
    CHECK(ec.value() == EINVAL); // identity only
    // the upgrade inside a read is EDEADLK
    db.read([&] {
        std::error_code inner;
        auto r = db.write([] { return 1; }, inner);
        CHECK(!r && inner.value() == EDEADLK);
#if QK_CXX_EXCEPTIONS
        CHECK_THROWS_STATUS(db.write([] {}), EDEADLK, "qk_dbqueue_write");
#endif
    });
    std::optional<int> r = db.read([&] { return value; }, ec);
    CHECK(!ec && r == 1);
    db.flush();
    db.flush(ec);
    CHECK(!ec);
}

TEST(db_queue_moves) {
    qk::db_queue a("a");
    qk_dbqueue_t *handle = a.native_handle();
    qk::db_queue b = std::move(a);
    CHECK(a.native_handle() == nullptr && b.native_handle() == handle);
    std::error_code ec;
    a.write([] {}, ec);
    CHECK(ec.value() == EINVAL);
    a.flush(ec);
    CHECK(ec.value() == EINVAL);
    CHECK(!a.identity_queue());
    // move-assigning destroys the old queue: its pending writes run first
    std::atomic<int> ran{0};
    qk::db_queue c("c");
    c.write_async([&] { ran++; });
    c = std::move(b);
    CHECK(ran == 1);
    CHECK(c.native_handle() == handle);
    // the identity queue is a retained value: it may outlive its DB queue
    qk::queue survivor;
    {
        qk::db_queue short_lived("short-lived");
        survivor = short_lived.identity_queue();
    }
    CHECK(survivor && std::string(survivor.label()) == "short-lived");
    survivor.perform([] {}, ec);
    CHECK(ec.value() == EINVAL);
    qk::db_queue failed(nullptr, ec);
    CHECK(!ec && failed.native_handle() != nullptr);
}

#if QK_CXX_EXCEPTIONS
TEST(db_exceptions_reach_the_caller_200_times) {
    qk::db_queue db("throwing.db");
    qk::guarded<std::vector<int>> g;
    for (int i = 0; i < 200; ++i) {
        bool caught = false;
        try {
            db.read([] { throw std::runtime_error("read"); });
        } catch (const std::runtime_error &) {
            caught = true;
        }
        CHECK(caught);
        caught = false;
        try {
            db.write([]() -> int { throw 5; });
        } catch (int v) {
            caught = v == 5;
        }
        CHECK(caught);
        caught = false;
        try {
            g.write([i](std::vector<int> &v) {
                v.push_back(i);
                throw std::logic_error("after the push");
            });
        } catch (const std::logic_error &) {
            caught = true;
        }
        CHECK(caught);
        caught = false;
        try {
            g.read([](const std::vector<int> &) -> int { throw 1; });
        } catch (int) {
            caught = true;
        }
        CHECK(caught);
        CHECK(db.write([i] { return i; }) == i);
        CHECK(g.read([](const std::vector<int> &v) { return v.size(); }) ==
              static_cast<size_t>(i + 1));
    }
}
#endif

TEST(write_async_destroyed_where_it_ran) {
    qk::db_queue db("async.db");
    std::atomic<int> destroyed{0};
    std::thread::id on, ran;
    check::signal done;
    db.write_async(tracker(&destroyed, &on, &ran, &done));
    CHECK(done.wait());
    CHECK(destroyed == 1 && on == ran);
    // guarded<T>::write_async: f(T&), destroyed where it ran
    qk::guarded<int> g(0);
    std::atomic<int> gd{0};
    std::thread::id gon, gran;
    check::signal gdone;
    g.write_async(tracker(&gd, &gon, &gran, &gdone));
    CHECK(gdone.wait());
    CHECK(gd == 1 && gon == gran);
    CHECK(g.read([](int v) { return v; }) == 1);
    // refused: an empty DB queue destroys it on the caller's thread
    qk::db_queue empty = std::move(db);
    std::atomic<int> refused{0};
    std::thread::id ron, rran;
    std::error_code ec;
    db.write_async(tracker(&refused, &ron, &rran, nullptr), ec);
    CHECK(ec.value() == EINVAL && refused == 1 && ron == std::this_thread::get_id());
#if QK_CXX_EXCEPTIONS
    std::atomic<int> thrown{0};
    std::thread::id ton, tran;
    CHECK_THROWS_STATUS(db.write_async(tracker(&thrown, &ton, &tran, nullptr)), EINVAL,
                        "qk_dbqueue_write_async");
    CHECK(thrown == 1 && ton == std::this_thread::get_id());
#endif
}

TEST(guarded_error_code_constructor) {
    std::error_code ec = std::make_error_code(std::errc::invalid_argument);
    qk::guarded<int> g(5, "ec", ec);
    CHECK(!ec && g.read([](int v) { return v; }) == 5);
    auto r = g.write([](int &v) { return ++v; }, ec);
    CHECK(!ec && r == 6);
    g.write_async([](int &v) { v = 0; }, ec);
    CHECK(!ec);
    g.db().flush(ec);
    CHECK(!ec && g.read([](int v) { return v; }) == 0);
    // an emptied DB queue: every call EINVAL, nothing run
    qk::db_queue gone = std::move(g.db());
    bool ran = false;
    auto none = g.read(
        [&](int) {
            ran = true;
            return 1;
        },
        ec);
    CHECK(!none && ec.value() == EINVAL && !ran);
    g.write([&](int &) { ran = true; }, ec);
    CHECK(ec.value() == EINVAL && !ran);
    g.db() = std::move(gone); // back, for the destructor
}

TEST(guarded_values) {
    qk::guarded<std::map<std::string, int>> cache({{"a", 1}}, "cache");
    CHECK(cache.read([](const auto &m) { return m.at("a"); }) == 1);
    cache.write([](auto &m) { m["b"] = 2; });
    CHECK(cache.read([](const auto &m) { return m.size(); }) == 2);
    // f gets const T& in read, T& in write
    cache.read(
        [](auto &m) { static_assert(std::is_const_v<std::remove_reference_t<decltype(m)>>); });
    cache.write(
        [](auto &m) { static_assert(!std::is_const_v<std::remove_reference_t<decltype(m)>>); });
    // a reference result comes back as a copy
    std::map<std::string, int> copy = cache.read([](const auto &m) -> const auto & { return m; });
    CHECK(copy.size() == 2);
    std::error_code ec;
    auto size = cache.read([](const auto &m) { return m.size(); }, ec);
    CHECK(!ec && size == 2u);
    cache.write([](auto &m) { m.clear(); }, ec);
    CHECK(!ec);
    cache.write_async([](auto &m) { m["c"] = 3; }, ec);
    cache.db().flush();
    CHECK(cache.read([](const auto &m) { return m.count("c"); }) == 1u);
    CHECK(cache.db().native_handle() != nullptr);
    const auto &constant = cache;
    CHECK(constant.db().identity_queue());
    qk::guarded<std::unique_ptr<int>> owner(std::make_unique<int>(4));
    CHECK(owner.read([](const std::unique_ptr<int> &p) { return *p; }) == 4);
    qk::guarded<int> zero;
    CHECK(zero.read([](int v) { return v; }) == 0);
    // pending writes run before the T is destroyed
    std::atomic<bool> seen{false};
    {
        qk::guarded<std::vector<int>> v;
        for (int i = 0; i < 100; ++i) v.write_async([i](std::vector<int> &x) { x.push_back(i); });
        v.write_async([&seen](std::vector<int> &x) { seen = x.size() == 100; });
    }
    CHECK(seen);
}

TEST(guarded_under_concurrency) {
    struct account {
        long a = 1000, b = 0;
    }; // invariant: a + b == 1000
    qk::guarded<account> bank;
    std::atomic<bool> broken{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < 2000; ++i) {
                if ((i + t) % 3 == 0) {
                    bank.write([](account &x) {
                        x.a -= 1;
                        x.b += 1;
                    });
                } else if ((i + t) % 3 == 1) {
                    bank.write_async([](account &x) {
                        x.a += 1;
                        x.b -= 1;
                    });
                } else if (bank.read([](const account &x) { return x.a + x.b; }) != 1000) {
                    broken = true;
                }
            }
        });
    }
    for (auto &thread : threads) thread.join();
    bank.db().flush();
    CHECK(!broken);
    CHECK(bank.read([](const account &x) { return x.a + x.b; }) == 1000);
}

CHILD(db_destroy_inside_its_block) {
    auto *db = new qk::db_queue("self-destroying");
    db->write([db] { delete db; });
}

TEST(db_destroy_inside_its_block_terminates) {
    CHECK(check::dies_with("db_destroy_inside_its_block", "qk_dbqueue_destroy: EBUSY"));
}

CHECK_MAIN
