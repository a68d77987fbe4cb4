/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * future.h — a header in the style of include/queuekit.h, with the kinds of declarations it may
 * gain: the man page generator must give every QK_EXPORT function its page from this too.
 */
#ifndef FUTURE_H
#define FUTURE_H

#define QK_EXPORT __attribute__((visibility("default")))

/* ========================================================================================== */
/* 4. Deadlock detection and wait reports                                                     */
/* ========================================================================================== */

/** A diagnostics callback: called with the context given alongside it and a report (valid
 *  during the call only). */
typedef void (*qk_report_function_t)(void *context, const char *report);

/** Installs `handler`, called on the refused thread each time a call is refused for a cycle:
 *
 *  - the report names every thread of the cycle;
 *  - NULL restores the default, which writes the report to stderr.
 *
 *  For example:
 *
 *      static void log_it(void *context, const char *report) { fputs(report, context); }
 *      qk_set_deadlock_handler(log_it, stderr);
 *
 *  Returns 0. */
QK_EXPORT int qk_set_deadlock_handler(qk_report_function_t handler, void *context);

/** Copies a snapshot of every waiting thread into `buffer` (strlcpy semantics) and returns its
 *  full length; "" when nobody waits. */
QK_EXPORT size_t qk_copy_wait_report(char *buffer, size_t size);

/** Calls `handler` once per wait that lasted `threshold_ns`. 0 turns the watch off. */
QK_EXPORT int qk_set_stall_handler(uint64_t threshold_ns, qk_report_function_t handler,
                                   void *context);

#endif
