# The conformance corpus tools for one Halide version, shared by tools/halide14 and
# tools/halide21 (tools/corpus/README.md): included by their CMakeLists.txt after they found
# Halide::Halide of that version. Nothing here is part of `all`, and the core library never links
# Halide.

#[[ tally_halide_corpus_tools(<version>)
    Adds halide<version>_corpus_defs (the pipelines, CorpusDefs.cpp), halide<version>_corpus_generator
    and halide<version>_reference_maker (built from tools/corpus/), and the custom target halide<version>_corpus building
    <binary dir>/corpus/libhalide<version>_corpus.so, whose path is also stored in the global
    property TALLY_HALIDE<version>_CORPUS_LIBRARY (depend on the target and dlopen the path). ]]
function(tally_halide_corpus_tools version)
  set(src ${PROJECT_SOURCE_DIR}/tools/corpus)
  # The pipelines' definitions, also for Halide 21's bridge tests and benchmark (test/halide,
  # bench/bridge_bench.cpp).
  set(defs halide${version}_corpus_defs)
  add_library(${defs} STATIC EXCLUDE_FROM_ALL ${src}/CorpusDefs.cpp)
  target_include_directories(${defs} PUBLIC ${src})
  target_link_libraries(${defs} PUBLIC Halide::Halide)
  set(gen halide${version}_corpus_generator)
  add_executable(${gen} EXCLUDE_FROM_ALL ${src}/corpus_generator.cpp)
  target_link_libraries(${gen} PRIVATE ${defs})

  # The reference maker needs Halide's runtime header only: it dlopens the library.
  set(ref halide${version}_reference_maker)
  add_executable(${ref} EXCLUDE_FROM_ALL ${src}/reference_maker.cpp)
  target_include_directories(${ref} PRIVATE
    $<TARGET_PROPERTY:Halide::Halide,INTERFACE_INCLUDE_DIRECTORIES>)
  target_link_libraries(${ref} PRIVATE ${CMAKE_DL_LIBS})
  tally_set_warnings(${ref})

  set(externs ${PROJECT_SOURCE_DIR}/test/conformance/extern_stages.c)
  set(externs_cxx ${PROJECT_SOURCE_DIR}/test/conformance/extern_stages_cpp.cpp)
  set(lib ${CMAKE_CURRENT_BINARY_DIR}/corpus/libhalide${version}_corpus.so)
  string(REGEX REPLACE "\\.so$" "_by_timer.so" by_timer_lib ${lib})
  add_custom_command(
    OUTPUT ${lib} ${by_timer_lib}
    COMMAND ${src}/build_library.sh $<TARGET_FILE:${gen}> ${lib} ${CMAKE_CXX_COMPILER}
            ${externs} ${externs_cxx} ${PROJECT_SOURCE_DIR}/runtime/include
    DEPENDS ${gen} ${src}/build_library.sh ${externs} ${externs_cxx}
            ${PROJECT_SOURCE_DIR}/test/conformance/truth_work.h
    COMMENT "Compiling the conformance pipelines with Halide ${version} into ${lib}"
    VERBATIM)
  add_custom_target(halide${version}_corpus DEPENDS ${lib})
  set_property(GLOBAL PROPERTY TALLY_HALIDE${version}_CORPUS_LIBRARY ${lib})
endfunction()
