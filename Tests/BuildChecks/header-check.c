/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * Compiled as C99, C11, C++11 and C++17 by gcc/g++ and clang/clang++ at
 * -Wall -Wextra -Werror -pedantic (see CMakeLists.txt beside this file): the public header must
 * be clean in every one of them. The code uses a few declarations of each section, so the
 * types, enums, macros and prototypes are really parsed, not just skipped.
 */
#include <queuekit.h>

#include <errno.h>

#if QK_VERSION_NUMBER != QK_VERSION_MAJOR * 10000 + QK_VERSION_MINOR * 100 + QK_VERSION_PATCH
#error "QK_VERSION_NUMBER disagrees with its parts"
#endif

/* The status list expands as its documentation shows (a repeated value would not compile). */
#define NAME_CASE(code, description)                                                               \
    case code:                                                                                     \
        return #code;
static const char *status_name(int status) {
    switch (status) {
        QK_STATUS_MAP(NAME_CASE)
    default:
        return "";
    }
}

static void work(void *context) {
    (void)context;
}

int header_check(void);

int header_check(void) {
    qk_function_t function = work;
    qk_queue_t *(*create)(const char *, qk_queue_kind_t) = qk_queue_create;
    int (*sync)(qk_queue_t *, void *, qk_function_t) = qk_queue_sync;
    int (*read)(qk_dbqueue_t *, void *, qk_function_t) = qk_dbqueue_read;
    int (*lock_when_until)(qk_condlock_t *, intptr_t, uint64_t) = qk_condlock_lock_when_until;
    qk_predicate_t predicate = QK_ON_QUEUE_AS_BARRIER;
    qk_qos_t qos = QK_QOS_USER_INITIATED;
    qk_condlock_stats_t stats;
    uint64_t forever = QK_FOREVER;

    stats.size = sizeof stats;
    stats.acquisitions = 0;
    return (function != 0) + (create != 0) + (sync != 0) + (read != 0) + (lock_when_until != 0) +
           (int)predicate + (int)qos + (int)(stats.size > 0) + (forever == UINT64_MAX) +
           (qk_strerror(0) != 0) + (status_name(EDEADLK)[0] == 'E') + (qk_status_name(0) != 0);
}
