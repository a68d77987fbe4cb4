# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

# How libqueuekit.so is linked, and the C it links in besides the Swift module. Included by
# CMakeLists.txt once the `queuekit` target exists. What each choice buys, measured on a program
# that only links the library (docs/linking.md has the numbers):
#
#   -static-stdlib            the Swift runtime and libdispatch inside: C users need no Swift
#   static libstdc++/libgcc   the C++ pieces the Swift runtime uses, inside and local (the version
#                             script hides them): no libstdc++.so.6 or libgcc_s.so.1 to load and
#                             relocate at every start (two thirds of the start-up cost before)
#   -z pack-relative-relocs   the ~22,000 relative relocations as DT_RELR (4 KiB instead of
#                             510 KiB); needs glibc >= 2.36 at run time, so only when the glibc
#                             built against is that new (the library needs the build's glibc anyway)
#   -z nodelete               dlclose leaves the library mapped: libdispatch's worker threads and
#                             the pthread-key destructors of threads that used it keep running
#                             its code (include/queuekit.h, "Loading the library")
#   --gc-sections, --icf=safe unreferenced sections dropped, identical functions folded where no
#                             address is compared (--icf=all would fold address-taken functions
#                             too: 136 KiB more, not worth a wrong comparison)
#   --build-id                the key the debug-symbols package is found by
#   link/swift-argv.c         the runtime's argv lookup without reading /proc/self/maps at load
#   abi/abi-types.c           no code: the C DWARF of the header that the ABI gate reads
option(QK_STATIC_LIBSTDCXX "Link libstdc++ and libgcc into libqueuekit.so (hidden)" ON)
# Full debug information (Swift and the shim), for the debug-symbols package (scripts/package.sh
# turns it on). Off otherwise: the ABI gate reads the C description alone, and the Swift
# objects' DWARF would add hundreds of Swift types to what it prints.
option(QK_DEBUG_INFO "Build libqueuekit.so with full debug information" OFF)
if(QK_DEBUG_INFO)
  target_compile_options(queuekit PRIVATE "$<$<COMPILE_LANGUAGE:Swift>:-g>")
  target_compile_options(queuekit_shim PRIVATE -g)
endif()

# --- The C linked in: the ABI description and the runtime's argument vector. ---
set(QK_ABI_TYPES_HEADER "${PROJECT_BINARY_DIR}/abi/queuekit-abi-types.h")
add_custom_command(OUTPUT "${QK_ABI_TYPES_HEADER}"
  COMMAND "${Python3_EXECUTABLE}" "${PROJECT_SOURCE_DIR}/scripts/abi.py" types
          "${PROJECT_SOURCE_DIR}/include/queuekit.h" "${QK_ABI_TYPES_HEADER}"
  DEPENDS "${PROJECT_SOURCE_DIR}/include/queuekit.h" "${PROJECT_SOURCE_DIR}/scripts/abi.py"
          "${PROJECT_SOURCE_DIR}/scripts/queuekit_header.py"
  COMMENT "Generating the ABI description from queuekit.h"
  VERBATIM)
# Always with -g (and every type kept): strip removes it with the rest of the debug information.
set_source_files_properties("${PROJECT_SOURCE_DIR}/abi/abi-types.c" PROPERTIES
  OBJECT_DEPENDS "${QK_ABI_TYPES_HEADER}"
  COMPILE_OPTIONS "-g;-fno-eliminate-unused-debug-types;-I${PROJECT_BINARY_DIR}/abi")
# Direct sources of the library (not an archive): their definitions come before the static
# runtime's on the link line, which is what keeps the runtime's CommandLine object out.
target_sources(queuekit PRIVATE
  "${PROJECT_SOURCE_DIR}/abi/abi-types.c"
  "${PROJECT_SOURCE_DIR}/link/swift-argv.c")

# --- The link. ---
target_link_options(queuekit PRIVATE
  -static-stdlib                 # Swift runtime + libdispatch inside: C users need no Swift
  -no-toolchain-stdlib-rpath     # no /opt/swift/... in RUNPATH
  -use-ld=lld
  "SHELL:-Xlinker --version-script=${PROJECT_SOURCE_DIR}/cmake/queuekit.map"
  "SHELL:-Xlinker --no-undefined"
  "SHELL:-Xlinker -z -Xlinker nodelete"
  "SHELL:-Xlinker --gc-sections"
  "SHELL:-Xlinker --icf=safe"
  "SHELL:-Xlinker --build-id=sha1")

# DT_RELR: glibc 2.36 reads it (GLIBC_ABI_DT_RELR); lld adds that version dependency itself.
execute_process(COMMAND getconf GNU_LIBC_VERSION OUTPUT_VARIABLE QK_GLIBC_VERSION
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
string(REGEX MATCH "[0-9]+\\.[0-9]+" QK_GLIBC_VERSION "${QK_GLIBC_VERSION}")
if(QK_GLIBC_VERSION AND QK_GLIBC_VERSION VERSION_GREATER_EQUAL 2.36)
  target_link_options(queuekit PRIVATE "SHELL:-Xlinker -z -Xlinker pack-relative-relocs")
else()
  message(STATUS "glibc ${QK_GLIBC_VERSION} < 2.36: relative relocations stay unpacked")
endif()

# The runtime's C++ dependencies, linked statically: swiftc's static-stdlib arguments say
# -lstdc++, which finds libstdc++.a first in a directory holding only it; clang's -static-libgcc
# takes the unwinder from libgcc_eh.a. CMake would add the shim's implicit C libraries (gcc_s
# among them) to the link line: drop gcc_s there.
if(QK_STATIC_LIBSTDCXX)
  execute_process(COMMAND "${CMAKE_C_COMPILER}" -print-file-name=libstdc++.a
                  OUTPUT_VARIABLE QK_LIBSTDCXX_ARCHIVE OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT IS_ABSOLUTE "${QK_LIBSTDCXX_ARCHIVE}" OR NOT EXISTS "${QK_LIBSTDCXX_ARCHIVE}")
    message(FATAL_ERROR "libstdc++.a not found (${CMAKE_C_COMPILER} -print-file-name=libstdc++.a): "
                        "install libstdc++-12-dev, or configure with -DQK_STATIC_LIBSTDCXX=OFF")
  endif()
  set(QK_STATIC_CXX_DIR "${PROJECT_BINARY_DIR}/static-libstdc++")
  file(MAKE_DIRECTORY "${QK_STATIC_CXX_DIR}")
  file(CREATE_LINK "${QK_LIBSTDCXX_ARCHIVE}" "${QK_STATIC_CXX_DIR}/libstdc++.a" SYMBOLIC)
  target_link_options(queuekit PRIVATE "SHELL:-L ${QK_STATIC_CXX_DIR}" "SHELL:-Xclang-linker -static-libgcc")
  list(REMOVE_ITEM CMAKE_C_IMPLICIT_LINK_LIBRARIES gcc_s)
endif()
