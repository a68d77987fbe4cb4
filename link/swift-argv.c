/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * The Swift standard library's command-line arguments, for libqueuekit.so only (CMake links this
 * file into the library ahead of the static Swift runtime; SwiftPM builds use the runtime's own).
 *
 * The runtime's definition (CommandLine.cpp) finds argv at load time by reading
 * /proc/self/maps with sscanf and scanning the stack: a fifth of everything the library costs a
 * program that merely links it, on every start, for arguments QueueKit never reads. glibc hands
 * every ELF initializer argc, argv and envp, in executables and in shared objects loaded by the
 * program or by dlopen alike, so one initializer keeps them instead. Defining the two functions
 * here keeps CommandLine.cpp's object, and its initializer, out of the link.
 */
#include <stddef.h>

static char *qk_empty_argv[] = {NULL};
static char **qk_argv = qk_empty_argv;
static int qk_argc;
static char **qk_override_argv;
static int qk_override_argc;

static void qk_keep_arguments(int argc, char **argv, char **envp) {
    (void)envp;
    if (argv != NULL) {
        qk_argc = argc;
        qk_argv = argv;
    }
}

__attribute__((section(".init_array"),
               used)) static void (*const qk_keep_arguments_entry)(int, char **,
                                                                   char **) = qk_keep_arguments;

/* The runtime's interface (stdlib/public/CommandLineSupport): the argument vector, with its
 * length stored in *outArgLen; an override set by the program, when it set one. */
char **_swift_stdlib_getUnsafeArgvArgc(int *outArgLen) {
    if (qk_override_argv != NULL) {
        *outArgLen = qk_override_argc;
        return qk_override_argv;
    }
    *outArgLen = qk_argc;
    return qk_argv;
}

void _swift_stdlib_overrideUnsafeArgvArgc(char **argv, int argc) {
    qk_override_argv = argv;
    qk_override_argc = argc;
}
