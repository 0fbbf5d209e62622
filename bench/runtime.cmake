# The runtime benchmark (Google Benchmark): cost of the hot profiler call, sampler CPU overhead,
# and profiler wall-time overhead on a switch-heavy synthetic workload. Included from
# bench/CMakeLists.txt; links only the runtime and Google Benchmark.
if(NOT TARGET benchmark::benchmark)
  find_package(benchmark REQUIRED)
endif()
add_executable(runtime_bench ${CMAKE_CURRENT_LIST_DIR}/runtime_bench.cpp)
target_link_libraries(runtime_bench PRIVATE tally_runtime benchmark::benchmark)
if(COMMAND tally_set_warnings)
  tally_set_warnings(runtime_bench)
endif()

# Continuous mode's cost (bench/continuous_bench.cpp): children in continuous mode at 19 and
# 100 Hz with a pprof window every second, and the bare wakeup floor at the same rates.
add_executable(continuous_bench ${CMAKE_CURRENT_LIST_DIR}/continuous_bench.cpp)
target_link_libraries(continuous_bench PRIVATE tally_runtime benchmark::benchmark)
if(COMMAND tally_set_warnings)
  tally_set_warnings(continuous_bench)
endif()
