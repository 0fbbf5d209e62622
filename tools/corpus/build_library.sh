#!/usr/bin/env bash
# Builds libhalide<V>_corpus.so: every corpus pipeline compiled by one Halide version (host and
# strict twins, no_runtime) plus Halide's standalone runtime once, linked into one shared object.
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
