# Finding Halide 21: PyPI's `halide` 21.0.0 (C++ SDK and CMake package included) in the virtual
# environment `./run.sh deps` makes. Included by the directories that use it (src/halide, the
# Halide bridge; tools/halide21, the corpus generator); nothing else in the build depends on it,
# and the core library never links it.
#
#   tally_find_halide21()
#
# defines the directory-scoped imported target Halide::Halide for Halide 21 where it is
# installed, and nothing where it is not; TALLY_HALIDE21_GENERATOR then names the library with
# Halide's GenGen main that a generator executable links (Halide::Generator from Halide's CMake
# package, else Halide::GenGen, libHalide_GenGen.a), and TALLY_HALIDE21_ROOT its install folder
# (the autoscheduler plugins are in its lib64/). Directory-scoped because tools/halide14 defines its
# own Halide::Halide for Debian's Halide 14.
set(TALLY_HALIDE21_PYTHON ${PROJECT_SOURCE_DIR}/.venv/bin/python CACHE FILEPATH
    "A Python whose halide module is Halide 21 (the Halide bridge, tools/halide21)")

macro(tally_find_halide21)
  set(_tally_halide21_root "")
  if(EXISTS ${TALLY_HALIDE21_PYTHON})
    execute_process(
      COMMAND ${TALLY_HALIDE21_PYTHON} -c "import halide; print(halide.install_dir())"
      OUTPUT_VARIABLE _tally_halide21_root OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
  if(CMAKE_VERSION VERSION_GREATER_EQUAL 3.28)
    # Halide_DIR may hold tools/halide14's Halide 14: look in Halide 21's package only.
    set(Halide_DIR ${_tally_halide21_root}/lib64/cmake/Halide)
    set(HalideHelpers_DIR ${_tally_halide21_root}/lib64/cmake/HalideHelpers)
    find_package(Halide 21 QUIET CONFIG COMPONENTS Halide shared HINTS ${_tally_halide21_root})
  elseif(EXISTS ${_tally_halide21_root}/include/HalideRuntime.h)
    # Halide 21's HalideConfig.cmake asks for CMake 3.28: with an older CMake, the same shared
    # library and headers are described here, the version read from Halide's runtime header.
    file(STRINGS ${_tally_halide21_root}/include/HalideRuntime.h _tally_halide21_major
         REGEX "^#define HALIDE_VERSION_MAJOR [0-9]+")
    string(REGEX REPLACE ".* " "" _tally_halide21_major "${_tally_halide21_major}")
    if(_tally_halide21_major EQUAL 21 AND EXISTS ${_tally_halide21_root}/lib64/libHalide.so)
      add_library(Halide::Halide SHARED IMPORTED)
      set_target_properties(Halide::Halide PROPERTIES
        IMPORTED_LOCATION ${_tally_halide21_root}/lib64/libHalide.so
        INTERFACE_INCLUDE_DIRECTORIES ${_tally_halide21_root}/include
        INTERFACE_COMPILE_FEATURES cxx_std_17)
      add_library(Halide::GenGen STATIC IMPORTED)
      set_target_properties(Halide::GenGen PROPERTIES
        IMPORTED_LOCATION ${_tally_halide21_root}/lib64/libHalide_GenGen.a
        INTERFACE_LINK_LIBRARIES "Halide::Halide;${CMAKE_DL_LIBS}")
    endif()
  endif()
  set(TALLY_HALIDE21_ROOT ${_tally_halide21_root})
  if(TARGET Halide::Generator)
    set(TALLY_HALIDE21_GENERATOR Halide::Generator)
  elseif(TARGET Halide::GenGen)
    set(TALLY_HALIDE21_GENERATOR Halide::GenGen)
  endif()
endmacro()
