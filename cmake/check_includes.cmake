# The include rules no include path can enforce, checked over the sources (a ctest,
# layering.Includes):
#  - the runtime includes no compiler header: it builds and links without the compiler
#    (include/tally/, src/, passes/, LLVM);
#  - no file of the compiler or the runtime includes by a relative path that climbs out of its
#    folder (`#include "../codegen/X.h"`): that is the one way around a layer's include root
#    (cmake/TallyLayers.cmake).
# Run as: cmake -DROOT=<repo> -P check_includes.cmake
if(NOT ROOT OR NOT IS_DIRECTORY "${ROOT}/runtime")
  message(FATAL_ERROR "ROOT must name the repository")
endif()
set(bad "")
set(count 0)
foreach(dir runtime src passes)
  file(GLOB_RECURSE files "${ROOT}/${dir}/*.c" "${ROOT}/${dir}/*.cpp" "${ROOT}/${dir}/*.h")
  foreach(f IN LISTS files)
    math(EXPR count "${count} + 1")
    file(STRINGS "${f}" lines REGEX "^[ \t]*#[ \t]*include")
    foreach(line IN LISTS lines)
      if(line MATCHES "[\"<][^\">]*\\.\\./")
        list(APPEND bad "${f}: ${line} (a relative include that leaves its folder)")
      elseif(dir STREQUAL "runtime" AND line MATCHES "[\"<](tally/|ir/|text/|codegen/|jit/|driver/|passes/|src/|llvm|clang)")
        list(APPEND bad "${f}: ${line} (the runtime includes a compiler header)")
      endif()
    endforeach()
  endforeach()
endforeach()
if(count LESS 50)
  message(FATAL_ERROR "only ${count} source files found under ${ROOT}: wrong ROOT?")
endif()
if(bad)
  list(JOIN bad "\n  " text)
  message(FATAL_ERROR "include rules broken:\n  ${text}")
endif()
message(STATUS "checked ${count} files: the runtime includes no compiler header, no include climbs out of its folder")
