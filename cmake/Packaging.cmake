# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

# Debian packages of the C library, made by CPack's DEB generator (./scripts/package.sh):
#
#   libqueuekit0         component runtime:     libqueuekit.so.0.x.y (stripped, with a
#                        .gnu_debuglink) and its SONAME link
#   libqueuekit0-dbgsym  its debug information, /usr/lib/debug/.build-id/NN/REST.debug (.ddeb)
#   libqueuekit-dev      component development: queuekit.h, queuekit.hpp (and queuekit/), the
#                        libqueuekit.so link, queuekit.pc,
#                        the CMake package and the manual pages (everything installed without a
#                        component)
#
# libqueuekit0's Depends come from dpkg-shlibdeps; its DEBIAN/symbols is the ABI record
# cmake/libqueuekit0.symbols, so a package built against it depends on the version that
# introduced the newest symbol it uses. Configure with -DCMAKE_INSTALL_PREFIX=/usr (Debian's
# multiarch libdir) and -DQK_MANPAGES_GZIP=ON (Debian policy), as package.sh does.
#
# Included before the install rules: the default component is what every install() without a
# COMPONENT lands in.
set(CMAKE_INSTALL_DEFAULT_COMPONENT_NAME development)
find_package(Python3 3.8 REQUIRED COMPONENTS Interpreter)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME queuekit)
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_VENDOR "QueueKit")
set(CPACK_PACKAGE_CONTACT "QueueKit developers <maintainers@queuekit.dev>")
set(CPACK_PACKAGE_DIRECTORY "${PROJECT_SOURCE_DIR}/dist")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Not stripped at install: CPack splits the debug information into libqueuekit0-dbgsym, then
# strips the library and adds the .gnu_debuglink (CPACK_DEBIAN_RUNTIME_DEBUGINFO_PACKAGE).
set(CPACK_STRIP_FILES OFF)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime development)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)          # <name>_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libqueuekit0)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_RUNTIME_DEBUGINFO_PACKAGE ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)          # DEBIAN/shlibs, next to the symbols
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
  "queue identity, reentrant DB queue and condition lock for C
QueueKit makes three GCD-era concurrency patterns safe on Linux: a
queue-identity registry (which queue am I on), a reentrant reader/writer DB
queue whose nested calls never deadlock, and a condition lock with
NSConditionLock semantics.
.
This package contains the shared library.")

set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_NAME libqueuekit-dev)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_DEPENDS "libqueuekit0 (= ${PROJECT_VERSION})")   # its files need nothing else
set(CPACK_COMPONENT_DEVELOPMENT_DESCRIPTION
  "queue identity, reentrant DB queue and condition lock for C (development)
QueueKit makes three GCD-era concurrency patterns safe on Linux: a
queue-identity registry (which queue am I on), a reentrant reader/writer DB
queue whose nested calls never deadlock, and a condition lock with
NSConditionLock semantics.
.
This package contains the C header, the header-only C++ layer (queuekit.hpp),
the pkg-config file, the CMake package and the manual pages (man queuekit).")

# DEBIAN/symbols (the symbols file without its comments) and the ldconfig trigger, which is all
# a library package needs. (CPack adds postinst/postrm scripts that run ldconfig as well, which
# lintian flags as maintscript-calls-ldconfig; scripts/package.sh takes them out again, and
# writes the Installed-Size that dpkg-gencontrol would.)
set(QK_DEBIAN_CONTROL_DIR "${PROJECT_BINARY_DIR}/debian/libqueuekit0")
file(MAKE_DIRECTORY "${QK_DEBIAN_CONTROL_DIR}")
execute_process(COMMAND "${Python3_EXECUTABLE}" "${PROJECT_SOURCE_DIR}/scripts/abi.py" control
                        "${PROJECT_SOURCE_DIR}/cmake/libqueuekit0.symbols" "${QK_DEBIAN_CONTROL_DIR}/symbols"
                COMMAND_ERROR_IS_FATAL ANY)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/cmake/libqueuekit0.symbols")
file(WRITE "${QK_DEBIAN_CONTROL_DIR}/triggers" "activate-noawait ldconfig\n")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA
  "${QK_DEBIAN_CONTROL_DIR}/symbols;${QK_DEBIAN_CONTROL_DIR}/triggers")

# Each package's /usr/share/doc/<package>: copyright (DEP-5, with the license) and changelog, as
# Debian policy asks, and NOTICE, which the Apache License asks to pass on.
foreach(package libqueuekit0 libqueuekit-dev)
  if(package STREQUAL libqueuekit0)
    set(component runtime)
  else()
    set(component development)
  endif()
  set(QK_DOC_DIR "${PROJECT_BINARY_DIR}/debian/doc/${package}")
  file(MAKE_DIRECTORY "${QK_DOC_DIR}")
  configure_file("${PROJECT_SOURCE_DIR}/cmake/debian/copyright" "${QK_DOC_DIR}/copyright" COPYONLY)
  configure_file("${PROJECT_SOURCE_DIR}/cmake/debian/changelog.in" "${QK_DOC_DIR}/changelog" @ONLY)
  execute_process(COMMAND gzip -9nf "${QK_DOC_DIR}/changelog" COMMAND_ERROR_IS_FATAL ANY)
  install(FILES "${QK_DOC_DIR}/copyright" "${QK_DOC_DIR}/changelog.gz" "${PROJECT_SOURCE_DIR}/NOTICE"
          DESTINATION "${CMAKE_INSTALL_DATAROOTDIR}/doc/${package}" COMPONENT ${component}
          EXCLUDE_FROM_ALL)
endforeach()

include(CPack)
