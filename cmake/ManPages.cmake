# SPDX-License-Identifier: Apache-2.0
# Copyright QueueKit developers

# Manual pages: section 3 for every exported function, section 7 `queuekit` for the overview,
# one section-7 page per component and `queuekit-cpp` for <queuekit.hpp>, generated at build
# time from the documentation of include/queuekit.h (and the opening comment of queuekit.hpp)
# and the pages' supplements in docs/man/ (RETURN VALUE, ERRORS, EXAMPLES) by
# scripts/manpages.py (nothing listed by hand: a new QK_EXPORT declaration gets its page, and the
# build fails until it has its supplement), installed under share/man with the development files.
#
# QK_MANPAGES_GZIP installs them compressed (gzip -9n), as Debian packages must.
find_package(Python3 3.8 REQUIRED COMPONENTS Interpreter)
option(QK_MANPAGES_GZIP "Install the manual pages gzip-compressed" OFF)

set(QK_MAN_DIR "${PROJECT_BINARY_DIR}/man")
file(GLOB QK_MAN_SUPPLEMENTS CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/docs/man/*.txt")
set(QK_MAN_FLAGS --version "${PROJECT_VERSION}")
if(QK_MANPAGES_GZIP)
  list(APPEND QK_MAN_FLAGS --gzip)
endif()
add_custom_command(OUTPUT "${QK_MAN_DIR}.stamp"
  COMMAND "${CMAKE_COMMAND}" -E rm -rf "${QK_MAN_DIR}"
  COMMAND "${Python3_EXECUTABLE}" "${PROJECT_SOURCE_DIR}/scripts/manpages.py"
          "${PROJECT_SOURCE_DIR}/include/queuekit.h" "${QK_MAN_DIR}" ${QK_MAN_FLAGS}
          --pages "${PROJECT_SOURCE_DIR}/docs/man"
  COMMAND "${CMAKE_COMMAND}" -E touch "${QK_MAN_DIR}.stamp"
  DEPENDS "${PROJECT_SOURCE_DIR}/include/queuekit.h" "${PROJECT_SOURCE_DIR}/include/queuekit.hpp"
          "${PROJECT_SOURCE_DIR}/scripts/manpages.py"
          ${QK_MAN_SUPPLEMENTS}
  COMMENT "Generating the manual pages from queuekit.h"
  VERBATIM)
add_custom_target(queuekit_manpages ALL DEPENDS "${QK_MAN_DIR}.stamp")

install(DIRECTORY "${QK_MAN_DIR}/" DESTINATION "${CMAKE_INSTALL_MANDIR}" COMPONENT development)
