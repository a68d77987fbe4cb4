// SPDX-License-Identifier: Apache-2.0
// Copyright QueueKit developers
// The small test harness of the C++ suite: CHECK, a bounded one-shot signal, a watchdog, and
// misuse children (this program run again with --child NAME, its stderr and exit captured).
#ifndef QK_CXX_CHECK_HPP
#define QK_CXX_CHECK_HPP

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <system_error>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace check {

inline int &failures() {
    static int count = 0;
    return count;
}

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);          \
            ++check::failures();                                                                   \
        }                                                                                          \
    } while (0)

/** A one-shot event: wait() gives up after `limit` (a deadlock fails the check, not the run). */
class signal {
  public:
    void notify() {
        std::lock_guard<std::mutex> guard(mutex_);
        set_ = true;
        cv_.notify_all();
    }
    bool wait(std::chrono::milliseconds limit = std::chrono::seconds(20)) {
        std::unique_lock<std::mutex> guard(mutex_);
        return cv_.wait_for(guard, limit, [&] { return set_; });
    }

  private:
    std::mutex mutex_;
    std::condition_variable cv_;
    bool set_ = false;
};

/** Tests by name, run in order; a child mode runs one misuse scenario. */
using test_fn = void (*)();
inline std::vector<std::pair<const char *, test_fn>> &tests() {
    static std::vector<std::pair<const char *, test_fn>> all;
    return all;
}
inline std::map<std::string, test_fn> &children() {
    static std::map<std::string, test_fn> all;
    return all;
}
struct registrar {
    registrar(const char *name, test_fn fn, bool child = false) {
        if (child)
            children()[name] = fn;
        else
            tests().emplace_back(name, fn);
    }
};
#define TEST(name)                                                                                 \
    static void name();                                                                            \
    static check::registrar name##_registrar(#name, name);                                         \
    static void name()
#define CHILD(name)                                                                                \
    static void child_##name();                                                                    \
    static check::registrar child_##name##_registrar(#name, child_##name, true);                   \
    static void child_##name()

/** Expects `expr` to throw std::system_error with `code` and a what() starting with `call`. */
#if QK_CXX_EXCEPTIONS
#define CHECK_THROWS_STATUS(expr, expected_, call)                                                 \
    do {                                                                                           \
        bool thrown_ = false;                                                                      \
        try {                                                                                      \
            (void)(expr);                                                                          \
        } catch (const std::system_error &e) {                                                     \
            thrown_ = true;                                                                        \
            CHECK(e.code().value() == (expected_));                                                \
            CHECK(e.code().category() == std::generic_category());                                 \
            CHECK(std::string(e.what()).rfind(call ":", 0) == 0);                                  \
        }                                                                                          \
        CHECK(thrown_);                                                                            \
    } while (0)
#endif

inline const char *&self_path() {
    static const char *path = nullptr;
    return path;
}

/** What a child run ended with. */
struct outcome {
    bool exited = false;
    int status = -1; // exit status, or the signal
    std::string err; // its stderr
    std::string first_line() const {
        return err.substr(0, err.find('\n'));
    }
};

/** Runs this program's child scenario `name` in a fresh process (fork + exec), at most 30 s. */
inline outcome run_child(const char *name) {
    outcome result;
    int fds[2];
    if (pipe(fds) != 0) return result;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        execl(self_path(), self_path(), "--child", name, static_cast<char *>(nullptr));
        _exit(127);
    }
    close(fds[1]);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    char buffer[512];
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            kill(pid, SIGKILL);
            break;
        }
        pollfd p{fds[0], POLLIN, 0};
        if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
        ssize_t n = read(fds[0], buffer, sizeof buffer);
        if (n <= 0) break;
        result.err.append(buffer, static_cast<size_t>(n));
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    result.exited = WIFEXITED(status);
    result.status = WIFEXITED(status)     ? WEXITSTATUS(status)
                    : WIFSIGNALED(status) ? WTERMSIG(status)
                                          : -1;
    return result;
}

/** Expects child `name` to die by SIGABRT (std::terminate, abort) with `line` first on stderr. */
inline bool dies_with(const char *name, const std::string &line) {
    outcome o = run_child(name);
    bool ok = !o.exited && o.status == SIGABRT && o.first_line().compare(0, line.size(), line) == 0;
    if (!ok)
        std::fprintf(stderr, "child %s: exited=%d status=%d stderr: %s\n", name, o.exited, o.status,
                     o.err.c_str());
    return ok;
}

inline int run(int argc, char **argv) {
    self_path() = "/proc/self/exe";
    if (argc == 3 && std::strcmp(argv[1], "--child") == 0) {
        auto found = children().find(argv[2]);
        if (found == children().end()) return 127;
        found->second();
        return 0;
    }
    alarm(120); // the watchdog: a hang fails the run
    for (auto &[name, fn] : tests()) {
        int before = failures();
        fn();
        std::printf("%s %s\n", failures() == before ? "ok  " : "FAIL", name);
        std::fflush(stdout);
    }
    std::printf("%d failure(s)\n", failures());
    return failures() == 0 ? 0 : 1;
}

} // namespace check

#define CHECK_MAIN                                                                                 \
    int main(int argc, char **argv) {                                                              \
        return check::run(argc, argv);                                                             \
    }

#endif
