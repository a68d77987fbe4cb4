#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

"""libqueuekit.so from Python's ctypes: a late dlopen into a running interpreter, then one call
of each component with Python callbacks, run on QueueKit's threads.

    ctypes_smoke.py LIBRARY
"""
import ctypes
import errno
import sys
import threading

WORK = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def main(path):
    qk = ctypes.CDLL(path)
    qk.qk_version.restype = ctypes.c_char_p
    qk.qk_strerror.restype = ctypes.c_char_p
    qk.qk_strerror.argtypes = [ctypes.c_int]
    qk.qk_queue_create.restype = ctypes.c_void_p
    qk.qk_queue_create.argtypes = [ctypes.c_char_p, ctypes.c_int]
    qk.qk_queue_release.argtypes = [ctypes.c_void_p]
    for name in ("qk_queue_sync", "qk_queue_async", "qk_dbqueue_read", "qk_dbqueue_write"):
        getattr(qk, name).argtypes = [ctypes.c_void_p, ctypes.c_void_p, WORK]
    qk.qk_queue_is_current.argtypes = [ctypes.c_void_p]
    qk.qk_queue_is_current.restype = ctypes.c_bool
    qk.qk_dbqueue_create.restype = ctypes.c_void_p
    qk.qk_dbqueue_create.argtypes = [ctypes.c_char_p]
    qk.qk_dbqueue_destroy.argtypes = [ctypes.c_void_p]
    qk.qk_condlock_create.restype = ctypes.c_void_p
    qk.qk_condlock_create.argtypes = [ctypes.c_ssize_t]
    for name in ("qk_condlock_lock_when", "qk_condlock_unlock_with"):
        getattr(qk, name).argtypes = [ctypes.c_void_p, ctypes.c_ssize_t]
    qk.qk_condlock_destroy.argtypes = [ctypes.c_void_p]

    problems = []

    def expect(condition, what):
        if not condition:
            problems.append(what)

    print(f"ctypes_smoke: QueueKit {qk.qk_version().decode()} loaded into Python {sys.version.split()[0]}")
    expect(qk.qk_strerror(errno.EDEADLK) != b"", "qk_strerror")

    queue = qk.qk_queue_create(b"python.serial", 0)
    seen = []
    done = threading.Event()
    on_queue = WORK(lambda _: seen.append(qk.qk_queue_is_current(queue)))
    finished = WORK(lambda _: done.set())
    expect(qk.qk_queue_sync(queue, None, on_queue) == 0 and seen == [True], "qk_queue_sync runs on the queue")
    expect(qk.qk_queue_async(queue, None, finished) == 0, "qk_queue_async")
    expect(done.wait(10), "the async block ran on a QueueKit thread")

    db = qk.qk_dbqueue_create(b"python.db")
    rows = []
    write = WORK(lambda _: rows.append("row"))
    read = WORK(lambda _: seen.append(len(rows)))
    expect(qk.qk_dbqueue_write(db, None, write) == 0 and qk.qk_dbqueue_read(db, None, read) == 0
           and seen[-1] == 1, "DB queue write then read")
    expect(qk.qk_dbqueue_destroy(db) == 0, "qk_dbqueue_destroy")

    lock = qk.qk_condlock_create(1)
    expect(qk.qk_condlock_lock_when(lock, 1) == 0 and qk.qk_condlock_unlock_with(lock, 2) == 0,
           "condition lock")
    expect(qk.qk_condlock_destroy(lock) == 0, "qk_condlock_destroy")
    qk.qk_queue_release(queue)

    for problem in problems:
        print(f"ctypes_smoke: FAIL: {problem}", file=sys.stderr)
    print(f"ctypes_smoke: {'ok' if not problems else f'{len(problems)} failed'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
