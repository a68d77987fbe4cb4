/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * hello.c — the smallest QueueKit program: check that the header and the loaded library agree,
 * run a block on a queue of your own, and ask from inside it which queue is running it.
 *
 *   cc hello.c $(pkg-config --cflags --libs queuekit) -o hello && ./hello
 *
 * Exits 0 when everything behaved as documented.
 */
#include <queuekit.h>

#include <stdio.h>
#include <string.h>

struct visit {
    qk_queue_t *queue;
    char label[64];
    bool was_current;
};

/* Runs on `queue`: qk_queue_current() answers "which queue am I on?". */
static void look_around(void *context) {
    struct visit *visit = context;
    qk_queue_copy_current_label(visit->label, sizeof visit->label);
    visit->was_current = qk_queue_current() == visit->queue && qk_queue_is_current(visit->queue);
}

int main(void) {
    printf("QueueKit %s (header %d.%d.%d)\n", qk_version(), QK_VERSION_MAJOR, QK_VERSION_MINOR,
           QK_VERSION_PATCH);
    if (qk_version_number() != QK_VERSION_NUMBER) {
        fprintf(stderr, "header and library disagree: %d != %d\n", qk_version_number(),
                QK_VERSION_NUMBER);
        return 1;
    }

    struct visit visit = {.queue = qk_queue_create("com.example.hello", QK_QUEUE_SERIAL)};
    if (visit.queue == NULL) {
        perror("qk_queue_create");
        return 1;
    }
    int status = qk_queue_sync(visit.queue, &visit, look_around);
    printf("sync: %s; inside, the current queue was \"%s\" (%s)\n", qk_strerror(status),
           visit.label, visit.was_current ? "ours" : "NOT ours");
    qk_queue_release(visit.queue);

    return status == 0 && visit.was_current && strcmp(visit.label, "com.example.hello") == 0 ? 0
                                                                                             : 1;
}
