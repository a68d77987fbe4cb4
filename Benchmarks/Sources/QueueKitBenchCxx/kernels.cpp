// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers
// The C++ layer's timed loops (see include/qkbench_cxx.h). Each measures the layer against the
// C call it wraps, doing the same work, so the difference is the layer's own cost.
#include "qkbench_cxx.h"

#include <dispatch/dispatch.h>
#include <queuekit.hpp>

#include <time.h>

#include <mutex>
#include <shared_mutex>

namespace {

qkb_sample_t sample(uint64_t elapsed, uint64_t ops) {
    return {static_cast<double>(elapsed) / static_cast<double>(ops), -1, -1, -1, -1};
}

struct record {
    long value = 1;
};

void empty_work(void*) {}

void read_record(void* context) {
    auto* r = static_cast<std::pair<const record*, long>*>(context);
    r->second = r->first->value;
}

/** CLOCK_MONOTONIC in nanoseconds (qkbench.h declares qkb_now_ns without extern "C" guards). */
uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

template <class Body>
qkb_sample_t timed(uint64_t iterations, Body&& body) {
    uint64_t begin = now_ns();
    for (uint64_t i = 0; i < iterations; i++) body();
    return sample(now_ns() - begin, iterations);
}

}  // namespace

extern "C" qkb_sample_t qkb_cxx_queue_sync(uint64_t iterations) {
    qk::queue q("bench.cxx.sync");
    return timed(iterations, [&] { q.sync([] {}); });
}

extern "C" qkb_sample_t qkb_cxx_c_queue_sync(uint64_t iterations) {
    qk_queue_t* q = qk_queue_create("bench.cxx.c.sync", QK_QUEUE_SERIAL);
    qkb_sample_t s = timed(iterations, [&] { qk_queue_sync(q, nullptr, empty_work); });
    qk_queue_release(q);
    return s;
}

extern "C" qkb_sample_t qkb_cxx_gcd_sync(uint64_t iterations) {
    dispatch_queue_t q = dispatch_queue_create("bench.cxx.gcd", nullptr);
    qkb_sample_t s = timed(iterations, [&] { dispatch_sync_f(q, nullptr, empty_work); });
    dispatch_release(q);
    return s;
}

extern "C" qkb_sample_t qkb_cxx_guarded_read(uint64_t iterations) {
    qk::guarded<record> g;
    long sum = 0;
    qkb_sample_t s = timed(iterations, [&] { sum += g.read([](const record& r) { return r.value; }); });
    if (sum != static_cast<long>(iterations)) std::abort();
    return s;
}

extern "C" qkb_sample_t qkb_cxx_c_dbqueue_read(uint64_t iterations) {
    qk_dbqueue_t* db = qk_dbqueue_create("bench.cxx.c.read");
    record data;
    long sum = 0;
    qkb_sample_t s = timed(iterations, [&] {
        std::pair<const record*, long> context{&data, 0};
        qk_dbqueue_read(db, &context, read_record);
        sum += context.second;
    });
    qk_dbqueue_destroy(db);
    if (sum != static_cast<long>(iterations)) std::abort();
    return s;
}

extern "C" qkb_sample_t qkb_cxx_shared_mutex_read(uint64_t iterations) {
    std::shared_mutex mutex;
    record data;
    long sum = 0;
    qkb_sample_t s = timed(iterations, [&] {
        std::shared_lock<std::shared_mutex> lock(mutex);
        sum += data.value;
    });
    if (sum != static_cast<long>(iterations)) std::abort();
    return s;
}

extern "C" qkb_sample_t qkb_cxx_condition_lock(uint64_t iterations) {
    qk::condition_lock<> lock;
    return timed(iterations, [&] {
        lock.lock();
        lock.unlock();
    });
}

extern "C" qkb_sample_t qkb_cxx_c_condlock(uint64_t iterations) {
    qk_condlock_t* lock = qk_condlock_create(0);
    qkb_sample_t s = timed(iterations, [&] {
        qk_condlock_lock(lock);
        qk_condlock_unlock(lock);
    });
    qk_condlock_destroy(lock);
    return s;
}

extern "C" qkb_sample_t qkb_cxx_std_mutex(uint64_t iterations) {
    std::mutex mutex;
    return timed(iterations, [&] {
        mutex.lock();
        mutex.unlock();
    });
}
