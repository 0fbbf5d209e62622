# The layers of the compiler library, and the rule the build enforces between them.
#
# The compiler is built as object libraries in dependency order
#
#     ir -> text -> passes -> codegen -> jit
#
# linked together (with LLVM and the runtime) into libtally.so; the command-line tools in
# src/driver/ sit on top and link that library. Each layer compiles with an include root of its
# own, made at configure time in the build tree, that holds links to exactly what the layer may
# use: its own folder and the folders of the layers below it (so `#include "ir/Scope.h"` works
# from text/ up), and the public headers (include/tally/) that those layers own. Nothing else is
# on a layer's include path — not src/, not include/ — so a header of a layer above cannot be
# found: an #include that runs back up fails to compile. test/layering/ proves it with targets
# that try, and check_includes.cmake (a ctest) rejects the one way around the roots, a relative
# `#include "../..."`.
#
#   tally_add_layer(<name> DIR <folder> [BELOW <layers below, lowest first>]
#                   [PUBLIC_HEADERS <headers of include/tally/ this layer owns>]
#                   SOURCES <files> [LLVM])
#
# defines the object library tally_<name>. LLVM puts LLVM's headers on the path (codegen and jit
# only). A layer must be defined after every layer it names in BELOW.

set(TALLY_LAYERS "" CACHE INTERNAL "the compiler's layers, lowest first")

function(tally_add_layer name)
  cmake_parse_arguments(L "LLVM" "DIR" "BELOW;PUBLIC_HEADERS;SOURCES" ${ARGN})
  foreach(below IN LISTS L_BELOW)
    if(NOT below IN_LIST TALLY_LAYERS)
      message(FATAL_ERROR "layer '${name}' names '${below}' below it, which is not defined yet")
    endif()
  endforeach()
  set_property(GLOBAL PROPERTY TALLY_LAYER_${name}_DIR ${L_DIR})
  set_property(GLOBAL PROPERTY TALLY_LAYER_${name}_HEADERS ${L_PUBLIC_HEADERS})
  set_property(GLOBAL PROPERTY TALLY_LAYER_${name}_BELOW ${L_BELOW})
  set(TALLY_LAYERS ${TALLY_LAYERS} ${name} CACHE INTERNAL "the compiler's layers, lowest first")

  tally_layer_include_root(${name} root)
  add_library(tally_${name} OBJECT ${L_SOURCES})
  target_include_directories(tally_${name} PRIVATE ${root})
  # The runtime's C header (struct layouts, enum values) is below every layer.
  target_link_libraries(tally_${name} PRIVATE tally_runtime_headers)
  if(L_LLVM)
    target_include_directories(tally_${name} SYSTEM PRIVATE ${LLVM_INCLUDE_DIRS})
    target_compile_definitions(tally_${name} PRIVATE ${LLVM_DEFINITIONS_LIST})
  endif()
  tally_set_warnings(tally_${name})
endfunction()

# Makes the include root of layer <name> and returns its path in <out>: a folder with one link
# per folder of the layer and the layers below it, and tally/ with one link per public header
# they own.
function(tally_layer_include_root name out)
  set(root ${PROJECT_BINARY_DIR}/layers/${name})
  file(REMOVE_RECURSE ${root})
  file(MAKE_DIRECTORY ${root}/tally)
  get_property(below GLOBAL PROPERTY TALLY_LAYER_${name}_BELOW)
  foreach(layer IN ITEMS ${name} ${below})
    get_property(dir GLOBAL PROPERTY TALLY_LAYER_${layer}_DIR)
    get_filename_component(leaf ${dir} NAME)
    file(CREATE_LINK ${dir} ${root}/${leaf} SYMBOLIC)
    get_property(headers GLOBAL PROPERTY TALLY_LAYER_${layer}_HEADERS)
    foreach(h IN LISTS headers)
      if(NOT EXISTS ${PROJECT_SOURCE_DIR}/include/tally/${h})
        message(FATAL_ERROR "layer '${layer}' owns include/tally/${h}, which does not exist")
      endif()
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/tally/${h} ${root}/tally/${h} SYMBOLIC)
    endforeach()
  endforeach()
  set(${out} ${root} PARENT_SCOPE)
endfunction()
