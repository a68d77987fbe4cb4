/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * The timed loops of the C++ layer (<queuekit.hpp>), each next to the C call it wraps and the
 * standard-library or libdispatch anchor a C++ programmer would otherwise use. Compiled as C++17
 * against the installed <queuekit.hpp>; declared here in C for the Swift driver.
 */
#ifndef QKBENCH_CXX_H
#define QKBENCH_CXX_H

#include <stdint.h>

#include "qkbench.h" /* qkb_sample_t (only the type: its functions have C linkage, undeclared for C++) */

#ifdef __cplusplus
extern "C" {
#endif

/** q.sync([]{}) onto an idle serial queue; qk_queue_sync of an empty function; dispatch_sync_f. */
qkb_sample_t qkb_cxx_queue_sync(uint64_t iterations);
qkb_sample_t qkb_cxx_c_queue_sync(uint64_t iterations);
qkb_sample_t qkb_cxx_gcd_sync(uint64_t iterations);

/** guarded<T>::read returning a field; the same read through qk_dbqueue_read; std::shared_mutex
 *  with std::shared_lock. */
qkb_sample_t qkb_cxx_guarded_read(uint64_t iterations);
qkb_sample_t qkb_cxx_c_dbqueue_read(uint64_t iterations);
qkb_sample_t qkb_cxx_shared_mutex_read(uint64_t iterations);

/** Uncontended condition_lock lock()+unlock(); qk_condlock_lock+unlock; std::mutex. */
qkb_sample_t qkb_cxx_condition_lock(uint64_t iterations);
qkb_sample_t qkb_cxx_c_condlock(uint64_t iterations);
qkb_sample_t qkb_cxx_std_mutex(uint64_t iterations);

#ifdef __cplusplus
}
#endif

#endif /* QKBENCH_CXX_H */
