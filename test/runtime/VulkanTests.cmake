# The Vulkan back end's tests (included from CMakeLists.txt): tiny GLSL compute shaders compiled to
# SPIR-V at build time (glslangValidator, Vulkan 1.1), each checked by spirv-val, and
# runtime_vulkan_tests, which links only the runtime and GoogleTest and loads the .spv files from
# the build tree. Without a Vulkan device the tests skip; they also run once, as one process, under
# the Khronos validation layer and fail on any validation message.
find_program(TALLY_GLSLANG_VALIDATOR glslangValidator)
find_program(TALLY_SPIRV_VAL spirv-val)
if(NOT TALLY_GLSLANG_VALIDATOR)
  message(STATUS "glslangValidator not found: runtime_vulkan_tests is not built")
  return()
endif()

set(tally_vk_shader_src ${CMAKE_CURRENT_SOURCE_DIR}/shaders)
set(tally_vk_shader_out ${CMAKE_CURRENT_BINARY_DIR}/vulkan_shaders)
set(tally_vk_spirv "")
foreach(shader add_scalar scale_copy pack_args grid slow halide_layout)
  set(spv ${tally_vk_shader_out}/${shader}.spv)
  # Halide's kernels enter at their own names, not main.
  set(entry "")
  if(shader STREQUAL "halide_layout")
    set(entry -e halide_entry --source-entrypoint main)
  endif()
  add_custom_command(
    OUTPUT ${spv}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${tally_vk_shader_out}
    COMMAND ${TALLY_GLSLANG_VALIDATOR} -V --target-env vulkan1.1 ${entry} -o ${spv}
            ${tally_vk_shader_src}/${shader}.comp
    DEPENDS ${tally_vk_shader_src}/${shader}.comp
    COMMENT "Compiling ${shader}.comp to SPIR-V"
    VERBATIM)
  list(APPEND tally_vk_spirv ${spv})
  if(TALLY_SPIRV_VAL)
    add_test(NAME runtime.vulkan.spirv-val.${shader}
             COMMAND ${TALLY_SPIRV_VAL} --target-env vulkan1.1 ${spv})
    set_tests_properties(runtime.vulkan.spirv-val.${shader} PROPERTIES LABELS "runtime;vulkan")
  endif()
endforeach()
add_custom_target(runtime_vulkan_shaders DEPENDS ${tally_vk_spirv})

add_executable(runtime_vulkan_tests VulkanTest.cpp)
add_dependencies(runtime_vulkan_tests runtime_vulkan_shaders)
target_link_libraries(runtime_vulkan_tests PRIVATE tally_runtime GTest::gtest GTest::gtest_main)
target_compile_definitions(runtime_vulkan_tests PRIVATE
  TALLY_VK_SHADER_DIR="${tally_vk_shader_out}")
if(COMMAND tally_set_warnings)
  tally_set_warnings(runtime_vulkan_tests)
endif()
# gtest_add_tests (the source is scanned at configure time) rather than gtest_discover_tests, whose
# PROPERTIES lose list values such as LABELS "runtime;vulkan".
gtest_add_tests(TARGET runtime_vulkan_tests SOURCES VulkanTest.cpp
  TEST_PREFIX "runtime.vulkan." TEST_LIST tally_vk_tests)
set_tests_properties(${tally_vk_tests} PROPERTIES
  LABELS "runtime;vulkan" TIMEOUT 60 ENVIRONMENT "MESA_SHADER_CACHE_DISABLE=true"
  SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
# The whole binary once under the Khronos validation layer, its messages printed
# (TALLY_VULKAN_DEBUG=1): the test's own check and this regular expression fail on any of them.
add_test(NAME runtime.vulkan.validation COMMAND runtime_vulkan_tests)
set_tests_properties(runtime.vulkan.validation PROPERTIES
  LABELS "runtime;vulkan" TIMEOUT 120
  ENVIRONMENT "VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation;TALLY_VULKAN_DEBUG=1;TALLY_VULKAN_EXPECT_NO_MESSAGES=1;MESA_SHADER_CACHE_DISABLE=true"
  FAIL_REGULAR_EXPRESSION "Validation Error|Vulkan validation|VUID-")
