# find_package / find_library wrappers: a missing dependency is one line naming the Debian
# package that provides it (scripts/setup.sh installs them all).
macro(gbx_require name debian_package)
  find_package(${name} ${ARGN} QUIET)
  if(NOT ${name}_FOUND)
    message(FATAL_ERROR "GBX needs ${name}: install the Debian package ${debian_package} (scripts/setup.sh)")
  endif()
endmacro()

function(gbx_require_library lib debian_package header)
  find_library(GBX_LIB_${lib} ${lib})
  find_path(GBX_INC_${lib} ${header})
  if(NOT GBX_LIB_${lib} OR NOT GBX_INC_${lib})
    message(FATAL_ERROR "GBX needs lib${lib}: install the Debian package ${debian_package} (scripts/setup.sh)")
  endif()
endfunction()
