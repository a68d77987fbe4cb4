/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/* The library's version is the header's: qk_version() and qk_version_number() of the built
 * libqueuekit.so (its Swift sources spell the string out) against QK_VERSION_* of queuekit.h (the
 * one version number, which CMake reads for the SONAME, queuekit.pc and the package version). */
#include <queuekit.h>
#include <stdio.h>
#include <string.h>

#define QK_STRING(x) #x
#define QK_VERSION_TEXT(major, minor, patch)                                                       \
    QK_STRING(major) "." QK_STRING(minor) "." QK_STRING(patch)

int main(void) {
    const char *expected = QK_VERSION_TEXT(QK_VERSION_MAJOR, QK_VERSION_MINOR, QK_VERSION_PATCH);
    printf("header %s (%d), library %s (%d)\n", expected, QK_VERSION_NUMBER, qk_version(),
           qk_version_number());
    return strcmp(qk_version(), expected) == 0 && qk_version_number() == QK_VERSION_NUMBER ? 0 : 1;
}
