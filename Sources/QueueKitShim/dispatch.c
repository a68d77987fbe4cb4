/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/* libdispatch's function-pointer calls for the queue's round trips (see queuekit_shim.h). The
 * prototypes are dispatch's own on Linux, where dispatch_queue_t is struct dispatch_queue_s *:
 * declared here so that the shim needs no dispatch headers. */
#include "queuekit_shim.h"

struct dispatch_queue_s;
typedef void (*qkshim_dispatch_function_t)(void *context);

extern void dispatch_sync_f(struct dispatch_queue_s *queue, void *context,
                            qkshim_dispatch_function_t work);
extern void dispatch_barrier_sync_f(struct dispatch_queue_s *queue, void *context,
                                    qkshim_dispatch_function_t work);
extern void dispatch_async_f(struct dispatch_queue_s *queue, void *context,
                             qkshim_dispatch_function_t work);
extern void dispatch_barrier_async_f(struct dispatch_queue_s *queue, void *context,
                                     qkshim_dispatch_function_t work);
extern struct dispatch_queue_s *dispatch_get_current_queue(void);

void qkshim_dispatch_sync(void *queue, bool barrier, void *context, void (*work)(void *context)) {
    if (barrier)
        dispatch_barrier_sync_f(queue, context, work);
    else
        dispatch_sync_f(queue, context, work);
}

void qkshim_dispatch_async(void *queue, bool barrier, void *context, void (*work)(void *context)) {
    if (barrier)
        dispatch_barrier_async_f(queue, context, work);
    else
        dispatch_async_f(queue, context, work);
}

void *qkshim_dispatch_current_queue(void) {
    return dispatch_get_current_queue();
}
