#!/usr/bin/env bash
# Builds libhalide<V>_corpus.so: every corpus pipeline compiled by one Halide version (host and
# strict twins, no_runtime) plus Halide's standalone runtime once, linked into one shared object;
# and libhalide<V>_corpus_by_timer.so: the -profile_by_timer twins with that profiler's runtime.
#   build_library.sh GENERATOR LIBRARY CXX EXTERN_C EXTERN_CXX RUNTIME_INCLUDE_DIR
# GENERATOR is that version's corpus_generator; $(dirname LIBRARY)/gen/ receives its .stmt, .o and
# .spec files (one generator process per pipeline, and one more for its GPU schedule, so each
# pipeline's text is independent of the others), LIBRARY the library, with the C and C++ functions
# of the extern stages (EXTERN_C, EXTERN_CXX: they include tally_runtime.h for halide_buffer_t,
# laid out as Halide's). -Bsymbolic binds the library's calls into Halide's runtime to its own
# copy, so a process that also holds Tally's runtime (bench/halide14_bench) never mixes the two.
set -euo pipefail
gen="$1" lib="$2" cxx="$3" externs="$4" externs_cxx="$5" runtime_include="$6"
out="$(dirname "$lib")"
rm -rf "$out/gen"
mkdir -p "$out/gen"
"$gen" --runtime "$out/gen/halide_runtime.o"
for p in $("$gen" --list); do
    "$gen" "$p" "$out/gen"
    "$gen" --gpu "$p" "$out/gen"
done
# Functions and loops 64-byte aligned, as bench/CMakeLists.txt compiles Tally's copy for the
# benchmark: both sides run a stage's code at the same alignment.
align="-falign-functions=64 -falign-loops=64"
"$cxx" -x c -O2 $align -fPIC -I"$runtime_include" -c "$externs" -o "$out/gen/extern_stages.o"
"$cxx" -x c++ -O2 $align -fPIC -I"$runtime_include" -c "$externs_cxx" -o "$out/gen/extern_stages_cpp.o"
"$cxx" -shared -Wl,-Bsymbolic -o "$lib.tmp" "$out"/gen/*.o -lpthread -ldl -lm
mv "$lib.tmp" "$lib"
# The -profile_by_timer objects (gen/by_timer/) with the runtime of that profiler, which defines
# the profiler's entry points as the sampler thread's runtime does: a library of their own,
# LIBRARY with _by_timer before .so.
"$gen" --runtime-by-timer "$out/gen/by_timer/halide_runtime.o"
by_timer="${lib%.so}_by_timer.so"
"$cxx" -shared -Wl,-Bsymbolic -o "$by_timer.tmp" "$out"/gen/by_timer/*.o \
    "$out/gen/extern_stages.o" "$out/gen/extern_stages_cpp.o" -lpthread -ldl -lm
mv "$by_timer.tmp" "$by_timer"
