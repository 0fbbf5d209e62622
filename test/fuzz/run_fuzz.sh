#!/usr/bin/env bash
# Builds and runs the fuzzers for a bounded time each.
#
#   test/fuzz/run_fuzz.sh [SECONDS [TARGET...]]
#
# SECONDS: how long each target runs (default 30). TARGETs (default: all of them):
#   fuzz_parser    text front end, verifier, printer (ParserRoundTrip.h)
#   fuzz_lowering  parse, verify, lower for 8 targets, verify, print, re-parse, equal
#                  (LoweringRoundTrip.h)
#   fuzz_halide21  both of those properties, seeded with the Halide 21 listings instead of the
#                  Halide 14 ones (the Halide 21 dialect)
#   fuzz_report    the profiler's text report and JSON writers (runtime/src/profiler/report.c)
#   fuzz_npy       the .npy reader of tally-run (src/driver/NpyFile.cpp)
#
# Environment: TALLY_FUZZ_BUILD_DIR (default <repo>/build-fuzz), TALLY_JOBS (build parallelism),
# TALLY_FUZZ_MAX_LEN (default 4096 for the IR-text targets: seeds longer than that are left out,
# and small inputs run about 100 times faster than the 80 KB corpus listings; 65536 takes them
# all, for coverage of the big listings at a few executions a second), TALLY_FUZZ_KEEP_CORPUS=1 (keep each
# target's working corpus from the last run instead of starting afresh: campaign.sh uses it),
# TALLY_FUZZ_FORK=N (run N libFuzzer jobs in parallel, -fork=N), TALLY_FUZZ_RUNS=N (stop after N
# executions, if that comes before SECONDS), TALLY_FUZZ_BLOCKS=0|1 (seed the IR targets with the
# Halide listings' blocks too, stmt_blocks.py; default 1 for runs of 120 s or more).
#
# Configures test/fuzz/CMakeLists.txt with clang-19 (libFuzzer + ASan + UBSan), builds the
# targets, seeds each one (the IR targets from every .stmt file of test/corpus/halide14,
# test/conformance/halide14 and test/ir, split at `// -----` lines, and test/fuzz/regressions/;
# the others from test/fuzz/seeds/<target>/), runs libFuzzer for SECONDS, and fails on any crash,
# leak, timeout, out-of-memory or violated property (the input is kept as
# BUILD/artifacts/<target>/crash-* etc.: copy it to test/fuzz/regressions/ once the bug is
# fixed). Prints each target's executions, rate and corpus size.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SECONDS_TO_RUN="${1:-30}"
shift || true
ALL_TARGETS=(fuzz_parser fuzz_lowering fuzz_halide21 fuzz_report fuzz_npy)
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=("${ALL_TARGETS[@]}")
BUILD="${TALLY_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
JOBS="${TALLY_JOBS:-$(nproc)}"

log() { printf '==> %s\n' "$*" >&2; }

log "configuring the fuzzers in $BUILD (clang-19, -fsanitize=fuzzer,address,undefined)"
CC=clang-19 CXX=clang++-19 cmake -S "$ROOT/test/fuzz" -B "$BUILD" -G Ninja >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}"

# The IR-text seeds: every lit/corpus file split into its `// -----` cases, one file each, the
# kept regressions, and the blocks of the Halide listings (stmt_blocks.py: each `produce`,
# loop, `allocate` or `if` block, a bare statement of its own); those longer than $2 bytes are
# left out. $3 is the listings' Halide version: 14 (test/corpus/halide14 and
# test/conformance/halide14, with test/ir's goldens) or 21 (test/conformance/halide21, with the
# goldens of test/ir that are Halide 21's: a `dialect=halide21` header).
stmt_seeds() {
    local out="$1" max="$2" version="$3" n=0 f
    local listings=("$ROOT/test/corpus/halide14" "$ROOT/test/conformance/halide14")
    local goldens=("$ROOT/test/ir")
    if [[ "$version" == 21 ]]; then
        listings=("$ROOT/test/conformance/halide21")
        goldens=()
        while IFS= read -r f; do goldens+=("$f"); done < <(grep -rl --include='*.stmt' \
            -e 'dialect=halide21' "$ROOT/test/ir" | sort)
    fi
    while IFS= read -r -d '' f; do
        n=$((n + 1))
        awk -v prefix="$out/$(printf '%04d' "$n")_$(basename "$f" .stmt)" '
            BEGIN { part = 0; file = prefix "_0.stmt"; printf "" > file }
            /^\/\/ -----/ { close(file); part++; file = prefix "_" part ".stmt"; printf "" > file; next }
            { print > file }' "$f"
    done < <(find "${listings[@]}" "${goldens[@]}" -name '*.stmt' -print0 | sort -z)
    while IFS= read -r -d '' f; do
        cp "$f" "$out/regression_$(basename "$f")"
    done < <(find "$ROOT/test/fuzz/regressions" -maxdepth 1 -type f ! -name "*.md" -print0 | sort -z)
    find "$out" -type f -size +"$max"c -delete
    # The listings' 2,600 blocks take fuzz_lowering about 30 s of a loaded CI machine just to run
    # once, which would leave CI's 30 s run no time to mutate: they seed runs of 2 minutes or
    # more (the campaigns), or any run with TALLY_FUZZ_BLOCKS=1 (0 leaves them out).
    # The Halide 21 listings are all longer than 4 KiB, so a short run takes a sample of their
    # blocks instead: every 25th (about 160), in a fixed order.
    local all_blocks="${TALLY_FUZZ_BLOCKS:-$((SECONDS_TO_RUN >= 120 ? 1 : 0))}"
    if [[ "$all_blocks" == 1 || "$version" == 21 ]]; then
        local blocks
        blocks=$(find "${listings[@]}" -name '*.stmt' -print0 |
            xargs -0 python3 "$ROOT/test/fuzz/stmt_blocks.py" "$max" "$out")
        if [[ "$all_blocks" != 1 ]]; then
            find "$out" -name 'block_*' | sort | awk 'NR % 25 != 1' | xargs -r rm
            blocks="a sample ($(find "$out" -name 'block_*' | wc -l)) of $blocks"
        fi
        log "seeds: $blocks blocks of the Halide $version listings"
    fi
}

status=0
for target in "${TARGETS[@]}"; do
    corpus="$BUILD/corpus/$target"
    seeds="$BUILD/seeds/$target"
    artifacts="$BUILD/artifacts/$target"
    if [[ "${TALLY_FUZZ_KEEP_CORPUS:-0}" != 1 ]]; then
        rm -rf "$corpus"
    fi
    rm -rf "$seeds" "$artifacts"
    mkdir -p "$corpus" "$seeds" "$artifacts"
    # A unit takes micro- to milliseconds; 60 s is a hang, not a loaded machine stalling the
    # process (docs/reliability.md).
    flags=(-timeout=60 -rss_limit_mb=2048 -print_final_stats=1)
    case "$target" in
    fuzz_parser | fuzz_lowering | fuzz_halide21)
        max_len="${TALLY_FUZZ_MAX_LEN:-4096}"
        stmt_seeds "$seeds" "$max_len" "$([[ $target == fuzz_halide21 ]] && echo 21 || echo 14)"
        flags+=(-max_len="$max_len" -dict="$ROOT/test/fuzz/parser.dict")
        ;;
    *)
        cp "$ROOT/test/fuzz/seeds/$target"/* "$seeds/"
        case "$target" in
        fuzz_npy) cp "$ROOT/test/fuzz/regressions/npy"/* "$seeds/" ;;
        fuzz_report) cp "$ROOT/test/fuzz/regressions/report"/* "$seeds/" ;;
        esac
        # A 4 KiB input must never make the reader or writer allocate 16 MiB at once.
        flags+=(-max_len=4096 -malloc_limit_mb=16)
        ;;
    esac
    if [[ -n "${TALLY_FUZZ_RUNS:-}" ]]; then
        flags+=(-runs="$TALLY_FUZZ_RUNS")
    fi
    if [[ -n "${TALLY_FUZZ_FORK:-}" ]]; then
        flags+=(-fork="$TALLY_FUZZ_FORK" -ignore_crashes=0)
    fi
    n=$(find "$seeds" -type f | wc -l)
    log "$target: $n seeds; fuzzing for ${SECONDS_TO_RUN} s"
    logfile="$BUILD/$target.log"
    rc=0
    # detect_leaks: libFuzzer turns a leak into a failure; halt on the first UBSan report. No
    # fake stacks for use-after-return and 5 frames of allocation stacks instead of 30: about
    # twice the executions a second (docs/reliability.md, "Throughput").
    # The fuzzer's CPU time (user + system, in $BUILD/<target>.cpu) as well as the wall time: on
    # a shared machine the rate per CPU second is the fuzzer's own speed, the rate per second of
    # wall time also the share of the cores it got.
    cputime=()
    rm -f "$BUILD/$target.cpu"
    if [[ -x /usr/bin/time ]]; then
        cputime=(/usr/bin/time -f "%U %S" -o "$BUILD/$target.cpu")
    fi
    ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:detect_stack_use_after_return=0:malloc_context_size=5}" \
        UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}" \
        "${cputime[@]}" "$BUILD/$target" -max_total_time="$SECONDS_TO_RUN" "${flags[@]}" \
        -artifact_prefix="$artifacts/" "$corpus" "$seeds" >"$logfile" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$logfile" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$logfile" | tail -1)
    cpu=$(awk 'NF == 2 && $1 ~ /^[0-9.]+$/ { printf "%.0f", $1 + $2 }' "$BUILD/$target.cpu" 2>/dev/null || true)
    inputs=$(find "$corpus" -type f | wc -l)
    if ((rc != 0)); then
        tail -n 60 "$logfile" >&2
        log "$target FAILED (exit $rc): the inputs that failed are in $artifacts:"
        ls -l "$artifacts" >&2 || true
        status=1
        continue
    fi
    log "$target: ${execs:-?} executions (${rate:-?}/s) in ${SECONDS_TO_RUN} s (${cpu:-?} s of" \
        "CPU); working corpus $inputs inputs; full log: $logfile"
done
exit "$status"
