// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers
// The C++ layer's cost in instructions, load-independent: each variant runs `n` operations of a
// <queuekit.hpp> call or of the C call it wraps (same work). Run under callgrind at two values
// of n; the difference of the totals divided by the difference of n is the cost of one
// operation, without the set-up (Benchmarks/callgrind/layer_cost.sh does this).
#include <queuekit.hpp>

#include <cstdlib>
#include <cstring>
#include <utility>

namespace {
struct record { long value = 1; };
void empty_work(void*) {}
void read_record(void* context) {
    auto* r = static_cast<std::pair<const record*, long>*>(context);
    r->second = r->first->value;
}
}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) return 2;
    const char* variant = argv[1];
    const long n = std::atol(argv[2]);
    long sum = 0;
    if (std::strcmp(variant, "c-sync") == 0) {
        qk_queue_t* q = qk_queue_create("c", QK_QUEUE_SERIAL);
        for (long i = 0; i < n; ++i) qk_queue_sync(q, nullptr, empty_work);
        qk_queue_release(q);
    } else if (std::strcmp(variant, "cxx-sync") == 0) {
        qk::queue q("cxx");
        for (long i = 0; i < n; ++i) q.sync([] {});
    } else if (std::strcmp(variant, "c-read") == 0) {
        qk_dbqueue_t* db = qk_dbqueue_create("c");
        record data;
        for (long i = 0; i < n; ++i) {
            std::pair<const record*, long> context{&data, 0};
            qk_dbqueue_read(db, &context, read_record);
            sum += context.second;
        }
        qk_dbqueue_destroy(db);
    } else if (std::strcmp(variant, "cxx-read") == 0) {
        qk::guarded<record> g;
        for (long i = 0; i < n; ++i) sum += g.read([](const record& r) { return r.value; });
    } else if (std::strcmp(variant, "c-lock") == 0) {
        qk_condlock_t* lock = qk_condlock_create(0);
        for (long i = 0; i < n; ++i) { qk_condlock_lock(lock); qk_condlock_unlock(lock); }
        qk_condlock_destroy(lock);
    } else if (std::strcmp(variant, "cxx-lock") == 0) {
        qk::condition_lock<> lock;
        for (long i = 0; i < n; ++i) { lock.lock(); lock.unlock(); }
    } else {
        return 2;
    }
    return sum == 0 || sum == n ? 0 : 1;
}
