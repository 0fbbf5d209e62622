#!/usr/bin/env bash
# Builds and runs the parser fuzzer (fuzz_parser.cpp) for a bounded time.
#
#   test/fuzz/run_fuzz.sh [SECONDS]     default 60
#
# Environment: TALLY_FUZZ_BUILD_DIR (default <repo>/build-fuzz), TALLY_JOBS (build parallelism),
# TALLY_FUZZ_MAX_LEN (default 65536; a small value such as 2048 trades the big seeds' coverage
# for many more executions per second).
# Configures test/fuzz/CMakeLists.txt with clang-19 (libFuzzer + ASan + UBSan, only src/ir and
# src/text), seeds a fresh working corpus from test/corpus/halide14/**/*.stmt, test/ir/**/*.stmt
# and test/fuzz/regressions/*, runs libFuzzer for SECONDS, and fails on any crash, leak, timeout,
# out-of-memory or round-trip mismatch (the input is kept as BUILD/artifacts/crash-* etc.: copy
# it to test/fuzz/regressions/ once the bug is fixed). Prints executions and corpus size.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SECONDS_TO_RUN="${1:-60}"
BUILD="${TALLY_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
JOBS="${TALLY_JOBS:-$(nproc)}"
MAX_LEN="${TALLY_FUZZ_MAX_LEN:-65536}"

log() { printf '==> %s\n' "$*" >&2; }

log "configuring the parser fuzzer in $BUILD (clang-19, -fsanitize=fuzzer,address,undefined)"
CC=clang-19 CXX=clang++-19 cmake -S "$ROOT/test/fuzz" -B "$BUILD" -G Ninja >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target fuzz_parser

# A fresh working corpus each time (new inputs land here), plus the seeds, copied flat.
corpus="$BUILD/corpus"
seeds="$BUILD/seeds"
artifacts="$BUILD/artifacts"
rm -rf "$corpus" "$seeds" "$artifacts"
mkdir -p "$corpus" "$seeds" "$artifacts"
n=0
while IFS= read -r -d '' f; do
    n=$((n + 1))
    cp "$f" "$seeds/$(printf '%04d' "$n")_$(basename "$f")"
done < <(find "$ROOT/test/corpus/halide14" "$ROOT/test/ir" -name '*.stmt' -print0 | sort -z;
    find "$ROOT/test/fuzz/regressions" -type f ! -name '*.md' -print0 | sort -z)
log "seeds: $n files; fuzzing for ${SECONDS_TO_RUN} s (-max_len=$MAX_LEN)"

logfile="$BUILD/fuzz.log"
rc=0
# detect_leaks: libFuzzer turns a leak into a failure; halt on the first UBSan report.
ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1}" \
    UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}" \
    "$BUILD/fuzz_parser" -max_total_time="$SECONDS_TO_RUN" -max_len="$MAX_LEN" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -dict="$ROOT/test/fuzz/parser.dict" \
    -artifact_prefix="$artifacts/" "$corpus" "$seeds" >"$logfile" 2>&1 || rc=$?

execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$logfile" | tail -1)
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$logfile" | tail -1)
inputs=$(find "$corpus" -type f | wc -l)
done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$logfile" | tail -1 || true)
if ((rc != 0)); then
    tail -n 80 "$logfile" >&2
    log "FAILED (exit $rc): inputs that failed are in $artifacts:"
    ls -l "$artifacts" >&2 || true
    exit 1
fi
log "fuzz_parser: ${execs:-?} executions (${rate:-?}/s) in ${SECONDS_TO_RUN} s; working corpus" \
    "$inputs new inputs beyond the $n seeds; ${done_line:-no DONE line}"
log "full log: $logfile"
