// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers
// QueueKit from C++: a queue that knows its identity, a value only its DB queue reaches, and a
// condition lock over an enum. Build: c++ -std=c++17 cpp-example.cpp $(pkg-config --cflags --libs queuekit)
#include <queuekit.hpp>

#include <cstdio>
#include <map>
#include <string>
#include <thread>

enum class phase { starting, ready };

int main() {
    qk::queue q("com.example.worker");
    q.sync([&] {
        std::error_code ec;
        q.sync([] {}, ec);   // onto itself: refused, not a hang
        std::printf("sync onto self: %s\n", ec.message().c_str());
        q.perform([] { std::puts("perform runs inline instead"); });
    });

    qk::guarded<std::map<std::string, int>> scores;
    scores.write([](auto& m) { m["ada"] = 3; });
    int ada = scores.read([](const auto& m) { return m.at("ada"); });

    qk::condition_lock gate{phase::starting};
    std::thread starter([&] { gate.set(phase::ready); });
    gate.lock_when(phase::ready);
    gate.unlock();
    starter.join();

    std::printf("ada has %d\n", ada);
    return ada == 3 ? 0 : 1;
}
