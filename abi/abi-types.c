/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * The C description of libqueuekit.so.0's ABI, compiled into the library with -g. It defines
 * nothing: it includes queuekit.h and the generated queuekit-abi-types.h (one typedef per exported
 * function, an enum of the status codes), so the library's DWARF holds every public type, every
 * function's prototype and every status value in C terms. abidw reads them from there
 * (scripts/abi.py); the Swift objects' own DWARF describes Swift types, which libabigail skips.
 */
#include "queuekit-abi-types.h"
