#!/usr/bin/env bash
# A longer fuzzing campaign than CI's: every target for its own time, one after another, each
# continuing from its working corpus of the last run (TALLY_FUZZ_KEEP_CORPUS=1), then a table of
# executions, rates (per second of wall time, and per second of the fuzzer's CPU time: on a shared
# machine the second is the fuzzer's own speed) and corpus sizes to copy into docs/reliability.md.
# TALLY_FUZZ_RUNS=N stops each target after N executions (e.g. 1000000) if that comes first.
#
#   test/fuzz/campaign.sh [TARGET=SECONDS ...]
#
# Default: fuzz_parser=400 fuzz_lowering=480 fuzz_report=220 fuzz_npy=110 (about 20 minutes of
# one core). The goal of 10^6 executions per target takes about 1,000 s of one core for
# fuzz_lowering and 350 to 400 s for fuzz_parser and fuzz_report (docs/reliability.md), more on a
# shared machine: give each target a generous time and TALLY_FUZZ_RUNS=1000000. Extra environment
# as for run_fuzz.sh.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${TALLY_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
runs=("$@")
((${#runs[@]})) || runs=(fuzz_parser=400 fuzz_lowering=480 fuzz_report=220 fuzz_npy=110)

rows=()
status=0
for run in "${runs[@]}"; do
    target="${run%%=*}"
    seconds="${run#*=}"
    rc=0
    TALLY_FUZZ_KEEP_CORPUS=1 "$ROOT/test/fuzz/run_fuzz.sh" "$seconds" "$target" || rc=$?
    log="$BUILD/$target.log"
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    cov=$(grep -a -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 || true)
    cpu=$(awk 'NF == 2 && $1 ~ /^[0-9.]+$/ { printf "%.0f", $1 + $2 }' "$BUILD/$target.cpu" \
        2>/dev/null || true)
    per_cpu="?"
    if [[ -n "$cpu" && -n "$execs" ]] && ((cpu > 0)); then
        per_cpu=$((execs / cpu))
    fi
    corpus=$(find "$BUILD/corpus/$target" -type f | wc -l)
    result=$([[ $rc == 0 ]] && echo "nothing found" || echo "FINDING (see $BUILD/artifacts/$target)")
    ((rc == 0)) || status=1
    rows+=("| $target | $seconds s | ${cpu:-?} s | ${execs:-?} | ${rate:-?}/s | $per_cpu/s | $corpus | ${cov:-?} | $result |")
done
printf '\n| Target | Time (limit) | CPU | Executions | Rate | Per CPU second | Corpus | Coverage | Result |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
printf '%s\n' "${rows[@]}"
exit "$status"
