/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * dlopen-chain FILE... : dlopens each file in order (RTLD_NOW), as a program loading plugins
 * late does. Exits 0 when all load; else prints the file and dlerror() and exits 1. When the last
 * file defines qk_version_number it calls it (the library loaded is usable).
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
    void *handle = NULL;
    for (int i = 1; i < argc; i++) {
        handle = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
        if (handle == NULL) {
            printf("dlopen %s: %s\n", argv[i], dlerror());
            return 1;
        }
    }
    int (*version)(void) =
        handle != NULL ? (int (*)(void))dlsym(handle, "qk_version_number") : NULL;
    if (version != NULL) printf("qk_version_number() = %d\n", version());
    return 0;
}
