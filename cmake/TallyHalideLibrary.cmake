# tally_add_halide_library: a Halide generator compiled through Tally, in the spirit of Halide's
# add_halide_library, so that a project switches by changing the function's name:
#
#     add_halide_library(blur FROM blur.generator FEATURES profile)          # Halide
#     tally_add_halide_library(blur FROM blur.generator FEATURES profile)    # Tally
#
#   tally_add_halide_library(<name> FROM <generator target>
#                            [GENERATOR <registered name>]    default: <name>
#                            [FUNCTION_NAME <function>]       default: <name>
#                            [TARGETS <target>...]            default: host (a Tally target)
#                            [FEATURES <feature>...]          added to the target (profile, ...)
#                            [AUTOSCHEDULER <Halide::Name | Name>]
#                            [PLUGINS <target or file>...]    loaded by the generator (-p)
#                            [PARAMS <param>=<value>...])     GeneratorParams
#
# FROM names the executable target of the generator (the sources that register it with
# HALIDE_REGISTER_GENERATOR, as add_halide_generator or add_executable made it). Its sources are
# built a second time into <name>.tally_generator with Tally's generator main
# (src/halide/gengen.cpp) instead of Halide's GenGen; running it writes <function>.o and
# <function>.h, the entry points Halide's library would have (<function>, <function>_argv,
# <function>_metadata). <name> is a static library of that object with the header's folder on
# its include path, linked with Tally's static runtime (tally_runtime) where Halide's would
# carry Halide's runtime. A profiling target (FEATURES profile) prints Tally's report when the
# program exits. Needs the Halide bridge (src/halide: Halide 21 installed).
#
# AUTOSCHEDULER, as add_halide_library's: Halide::Mullapudi2016 (the imported plugin, loaded by
# the generator) or a name whose plugin PLUGINS loads; it is applied to the generator's pipeline
# as Halide's build_module applies it (autoscheduler=<name> among the PARAMS, and
# autoscheduler.<field>=<value> there sets its parameters).
#
# Several TARGETS make a multi-target library, as add_halide_library's do: each target (with the
# FEATURES added to it) is compiled on its own, and <function> runs the first one whose x86 ISA
# extensions the CPU has, the last being the baseline (name each target: x86-64-linux-avx2, not
# host). Each variant's function, and its pipeline in Tally's report, is <function>_<target>
# (the target string with '_' for every character but a letter or digit).
function(tally_add_halide_library name)
  cmake_parse_arguments(A "" "FROM;GENERATOR;FUNCTION_NAME;AUTOSCHEDULER"
                        "TARGETS;FEATURES;PARAMS;PLUGINS" ${ARGN})
  if(NOT TARGET tally_halide_gengen)
    message(FATAL_ERROR "tally_add_halide_library(${name}): the Halide bridge is not built "
                        "(Halide 21 not found: ./run.sh deps)")
  endif()
  if(NOT A_FROM OR NOT TARGET ${A_FROM})
    message(FATAL_ERROR "tally_add_halide_library(${name}): FROM must name the generator's "
                        "executable target")
  endif()
  foreach(opt GENERATOR FUNCTION_NAME)
    if(NOT A_${opt})
      set(A_${opt} ${name})
    endif()
  endforeach()
  if(NOT A_TARGETS)
    set(A_TARGETS host)
  endif()
  # The autoscheduler's plugin and name, as add_halide_library takes them.
  set(plugins "")
  foreach(p IN LISTS A_PLUGINS)
    if(TARGET ${p})
      list(APPEND plugins $<TARGET_FILE:${p}>)
    else()
      list(APPEND plugins ${p})
    endif()
  endforeach()
  if(A_AUTOSCHEDULER)
    if(A_AUTOSCHEDULER MATCHES "::")
      if(NOT TARGET ${A_AUTOSCHEDULER})
        message(FATAL_ERROR "tally_add_halide_library(${name}): the autoscheduler "
                            "${A_AUTOSCHEDULER} does not exist")
      endif()
      list(APPEND plugins $<TARGET_FILE:${A_AUTOSCHEDULER}>)
      string(REGEX REPLACE ".*::(.*)" "\\1" A_AUTOSCHEDULER "${A_AUTOSCHEDULER}")
    elseif(NOT plugins)
      message(FATAL_ERROR "tally_add_halide_library(${name}): AUTOSCHEDULER ${A_AUTOSCHEDULER} "
                          "names no plugin: give Halide::${A_AUTOSCHEDULER} or PLUGINS")
    endif()
    list(PREPEND A_PARAMS "autoscheduler=${A_AUTOSCHEDULER}")
  endif()
  set(plugin_args "")
  if(plugins)
    list(JOIN plugins "," joined)
    set(plugin_args -p ${joined})
  endif()

  # Each target with the FEATURES added, comma-separated for the generator.
  set(targets "")
  foreach(t IN LISTS A_TARGETS)
    foreach(f IN LISTS A_FEATURES)
      string(APPEND t "-${f}")
    endforeach()
    list(APPEND targets ${t})
  endforeach()
  list(JOIN targets "," target)

  # The generator's sources, again, with Tally's main.
  get_target_property(srcs ${A_FROM} SOURCES)
  get_target_property(src_dir ${A_FROM} SOURCE_DIR)
  set(abs_srcs "")
  foreach(s IN LISTS srcs)
    cmake_path(ABSOLUTE_PATH s BASE_DIRECTORY ${src_dir} OUTPUT_VARIABLE a)
    list(APPEND abs_srcs ${a})
  endforeach()
  set(gen ${name}.tally_generator)
  add_executable(${gen} ${abs_srcs})
  target_link_libraries(${gen} PRIVATE tally_halide_gengen)
  get_target_property(incs ${A_FROM} INCLUDE_DIRECTORIES)
  if(incs)
    target_include_directories(${gen} PRIVATE ${incs})
  endif()

  set(dir ${CMAKE_CURRENT_BINARY_DIR}/${name}.tally)
  set(obj ${dir}/${A_FUNCTION_NAME}.o)
  set(hdr ${dir}/${A_FUNCTION_NAME}.h)
  # A multi-target library's variants (src/halide/gengen.cpp names them).
  list(LENGTH targets n)
  if(n GREATER 1)
    math(EXPR last "${n} - 1")
    foreach(k RANGE ${last})
      list(APPEND obj ${dir}/${A_FUNCTION_NAME}.variant${k}.o)
    endforeach()
  endif()
  add_custom_command(
    OUTPUT ${obj} ${hdr}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
    COMMAND ${gen} -g ${A_GENERATOR} -f ${A_FUNCTION_NAME} -o ${dir} -t ${target} ${plugin_args}
            ${A_PARAMS}
    DEPENDS ${gen}
    COMMENT "Compiling Halide generator ${A_GENERATOR} through Tally for ${target}"
    VERBATIM)
  add_library(${name} STATIC ${obj} ${hdr})
  set_source_files_properties(${obj} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  set_target_properties(${name} PROPERTIES LINKER_LANGUAGE C)
  target_include_directories(${name} INTERFACE ${dir})
  target_link_libraries(${name} INTERFACE tally_runtime Threads::Threads ${CMAKE_DL_LIBS} m)
endfunction()
