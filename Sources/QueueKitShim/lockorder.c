/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

#define _GNU_SOURCE
#include "queuekit_shim_lockorder.h"
#include "queuekit_shim.h"

#include <dlfcn.h>
#include <link.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Atomic uint8_t qkshim_lockorder_mode;
_Atomic uint64_t qkshim_lockorder_epoch;
_Atomic uint64_t qkshim_lockorder_session = 1;
_Atomic uint64_t qkshim_lockorder_nodes[(1u << QKSHIM_LOCKORDER_NODE_BITS) / 64];
__thread void *qkshim_tls_lockorder __attribute__((tls_model("initial-exec")));

static pthread_key_t qkshim_lockorder_key;
static pthread_once_t qkshim_lockorder_key_once = PTHREAD_ONCE_INIT;
static void (*qkshim_lockorder_on_exit)(void *state);

static void qkshim_lockorder_thread_exit(void *state) {
    qkshim_tls_lockorder = NULL;
    void (*on_exit)(void *) = __atomic_load_n(&qkshim_lockorder_on_exit, __ATOMIC_ACQUIRE);
    if (state != NULL && on_exit != NULL) qkshim_run_exit_hook(on_exit, state);
}

static void qkshim_lockorder_make_key(void) {
    int rc = pthread_key_create(&qkshim_lockorder_key, qkshim_lockorder_thread_exit);
    if (rc != 0) {
        fprintf(stderr, "QueueKit: pthread_key_create failed: error %d\n", rc);
        abort();
    }
}

void qkshim_lockorder_thread_install(void *state, void (*on_exit)(void *state)) {
    pthread_once(&qkshim_lockorder_key_once, qkshim_lockorder_make_key);
    __atomic_store_n(&qkshim_lockorder_on_exit, on_exit, __ATOMIC_RELEASE);
    qkshim_tls_lockorder = state;
    int rc = pthread_setspecific(qkshim_lockorder_key, state);
    if (rc != 0) {
        fprintf(stderr, "QueueKit: pthread_setspecific failed: error %d\n", rc);
        abort();
    }
}

void qkshim_lockorder_nodes_clear(void) {
    for (size_t index = 0; index < sizeof qkshim_lockorder_nodes / sizeof qkshim_lockorder_nodes[0];
         index++)
        __atomic_store_n((uint64_t *)&qkshim_lockorder_nodes[index], 0, __ATOMIC_RELAXED);
}

int qkshim_lockorder_parse(const char *text) {
    if (text == NULL) return -1;
    if (strcmp(text, "off") == 0) return 0;
    if (strcmp(text, "report") == 0) return 1;
    if (strcmp(text, "abort") == 0) return 2;
    return -1;
}

static int qkshim_lockorder_env = -1;

int qkshim_lockorder_env_mode(void) {
    return qkshim_lockorder_env;
}

/* QUEUEKIT_LOCK_ORDER, read once when the library is loaded. */
__attribute__((constructor)) static void qkshim_lockorder_read_env(void) {
    const char *text = getenv("QUEUEKIT_LOCK_ORDER");
    if (text == NULL) return;
    int mode = qkshim_lockorder_parse(text);
    if (mode < 0) {
        fprintf(stderr,
                "QueueKit: QUEUEKIT_LOCK_ORDER=\"%s\" ignored (expected off, report or abort)\n",
                text);
        return;
    }
    qkshim_lockorder_env = mode;
    qkshim_lockorder_mode_set((uint8_t)mode);
}

/* The object this file is part of (libqueuekit.so, or the program QueueKit is linked into), and
 * the address range of its loaded segments, found once. */
static struct {
    pthread_once_t once;
    const void *base;
    const char *name;
    uintptr_t start, end;
} qkshim_lockorder_self = {PTHREAD_ONCE_INIT, NULL, NULL, 0, 0};

static int qkshim_lockorder_find_segments(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    if ((const void *)info->dlpi_addr != qkshim_lockorder_self.base) return 0;
    for (int index = 0; index < info->dlpi_phnum; index++) {
        const ElfW(Phdr) *segment = &info->dlpi_phdr[index];
        if (segment->p_type != PT_LOAD) continue;
        uintptr_t start = info->dlpi_addr + segment->p_vaddr, end = start + segment->p_memsz;
        if (qkshim_lockorder_self.start == 0 || start < qkshim_lockorder_self.start)
            qkshim_lockorder_self.start = start;
        if (end > qkshim_lockorder_self.end) qkshim_lockorder_self.end = end;
    }
    return 1;
}

static void qkshim_lockorder_find_self(void) {
    Dl_info info;
    if (dladdr((void *)&qkshim_lockorder_find_self, &info) == 0) return;
    qkshim_lockorder_self.base = info.dli_fbase;
    qkshim_lockorder_self.name = info.dli_fname;
    /* dlpi_addr is the load bias; for a shared object it is also dli_fbase. */
    dl_iterate_phdr(qkshim_lockorder_find_segments, NULL);
}

static bool qkshim_lockorder_is_queuekit_symbol(const char *symbol) {
    if (symbol == NULL) return false;
    return strncmp(symbol, "qk_", 3) == 0 || strncmp(symbol, "qkshim_", 7) == 0 ||
           strncmp(symbol, "$s8QueueKit", 11) == 0 ||
           strncmp(symbol, "$s12QueueKitCAPI", 16) == 0 ||
           strncmp(symbol, "$s16QueueKitCLibrary", 20) == 0;
}

uintptr_t qkshim_lockorder_call_site(void) {
    void *frames[48];
    int count = backtrace(frames, 48);
    pthread_once(&qkshim_lockorder_self.once, qkshim_lockorder_find_self);
    /* In libqueuekit.so every frame of the library is QueueKit's (an address range test); linked
     * into a program, only the frames whose symbols say so are (dladdr). */
    bool own_is_library = qkshim_lockorder_self.name != NULL &&
                          strstr(qkshim_lockorder_self.name, "libqueuekit") != NULL &&
                          qkshim_lockorder_self.end != 0;
    for (int index = 1; index < count; index++) {
        uintptr_t address = (uintptr_t)frames[index];
        if (own_is_library) {
            if (address >= qkshim_lockorder_self.start && address < qkshim_lockorder_self.end)
                continue;
            return address;
        }
        Dl_info info;
        memset(&info, 0, sizeof info);
        if (dladdr(frames[index], &info) == 0) return address;
        if (qkshim_lockorder_is_queuekit_symbol(info.dli_sname)) continue;
        return address;
    }
    return 0;
}

size_t qkshim_lockorder_describe_address(uintptr_t address, char *buffer, size_t size) {
    char text[512];
    Dl_info info;
    memset(&info, 0, sizeof info);
    /* A return address points after the call: look up the byte before it. */
    if (address != 0 && dladdr((void *)(address - 1), &info) != 0 && info.dli_fname != NULL) {
        if (info.dli_sname != NULL && info.dli_saddr != NULL) {
            snprintf(text, sizeof text, "%s+0x%lx (%s)", info.dli_sname,
                     (unsigned long)(address - (uintptr_t)info.dli_saddr), info.dli_fname);
        } else {
            snprintf(text, sizeof text, "0x%lx (%s)", (unsigned long)address, info.dli_fname);
        }
    } else {
        snprintf(text, sizeof text, "0x%lx", (unsigned long)address);
    }
    size_t length = strlen(text);
    if (size > 0) {
        size_t copy = length < size - 1 ? length : size - 1;
        memcpy(buffer, text, copy);
        buffer[copy] = '\0';
    }
    return length;
}

void qkshim_lockorder_abort(void) {
    abort();
}
