#!/usr/bin/env bash
# The CUDA back end on a machine with an NVIDIA GPU and driver, in one command (under 5 minutes
# on 16 cores; most of it is building libtally):
#
#   test/gpu/cuda_check.sh [--build-dir DIR] [--no-build] [--no-sanitizer]
#
#  1. preflight: the driver library (libcuda.so.1) must be loadable, else exit 2 at once;
#  2. build: cmake + ninja (Release, -DTALLY_BUILD_BENCH=OFF -DTALLY_BUILD_PYTHON=OFF, no tests),
#     only libtally; then test/gpu/cuda_check.cpp with the apps' references against it;
#  3. cuda_check: kernels of test/ir/cuda-ptx/kernels.stmt, the GPU apps (gpu_gpu_cpu, blur_gpu,
#     bounce) for host-cuda, host-cuda-profile and host-cuda-profile_timestamps against their
#     references with timings and the profiler's report, and the attribution check on
#     test/gpu/attribution.stmt (profiled shares of A, B, C against timed stages, with and
#     without injected syncs, and under profile_timestamps from CUDA events: shares, records
#     billed, no injected sync, device copies timed with events at a plausible bandwidth,
#     commands placed on the host clock by paired readings (span within the runs' wall time),
#     wall time against plain and sync mode) - see cuda_check.cpp;
#  4. compute-sanitizer, where installed: memcheck over the quick run, racecheck over the kernels
#     (shared memory and a barrier); any report fails the check;
#  5. a summary with the time each step took.
#
# Environment: TALLY_CUDA_CHECK_BUILD (build directory, default <repo>/build-cuda-check),
# CMAKE_GENERATOR is ignored (Ninja), TALLY_CUDA_DEVICE picks the GPU (default 0),
# TALLY_CUDA_LIBRARY overrides the driver library (as the runtime does).
# Exit status: 0 all passed; 1 a check failed; 2 no usable CUDA driver/device or missing tools.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${TALLY_CUDA_CHECK_BUILD:-$ROOT/build-cuda-check}
DO_BUILD=1
DO_SANITIZER=1
while [[ $# -gt 0 ]]; do
    case "$1" in
    --build-dir) BUILD=$2; shift 2 ;;
    --no-build) DO_BUILD=0; shift ;;
    --no-sanitizer) DO_SANITIZER=0; shift ;;
    -h | --help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "cuda_check.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
done

START=$(date +%s)
STEPS=()
step_done() { STEPS+=("$(printf '%-34s %4ds' "$1" $(($(date +%s) - $2)))"); }
die() { echo "cuda_check.sh: $*" >&2; exit 2; }
JOBS=$(nproc 2>/dev/null || echo 4)

# ---- 1. preflight -------------------------------------------------------------------------------
t=$(date +%s)
DRIVER=${TALLY_CUDA_LIBRARY:-libcuda.so.1}
if command -v python3 >/dev/null 2>&1; then
    if ! python3 -c "import ctypes, sys; ctypes.CDLL(sys.argv[1])" "$DRIVER" 2>/dev/null; then
        die "no CUDA driver: $DRIVER not found (dlopen failed); this check needs a machine with an NVIDIA GPU and its driver"
    fi
elif ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1' && [[ -z ${TALLY_CUDA_LIBRARY:-} ]]; then
    die "no CUDA driver: libcuda.so.1 not found; this check needs a machine with an NVIDIA GPU and its driver"
fi
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=index,name,driver_version,compute_cap,memory.total --format=csv,noheader \
        || die "nvidia-smi cannot talk to the driver"
fi
for tool in cmake ninja c++; do
    command -v "$tool" >/dev/null 2>&1 || die "'$tool' is not installed"
done
step_done "preflight" "$t"

# ---- 2. build -----------------------------------------------------------------------------------
t=$(date +%s)
if [[ $DO_BUILD == 1 ]]; then
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTALLY_BUILD_BENCH=OFF \
        -DTALLY_BUILD_PYTHON=OFF -DTALLY_BUILD_TESTS=OFF >"$BUILD.cmake.log" 2>&1 \
        || { tail -30 "$BUILD.cmake.log"; die "cmake failed (log: $BUILD.cmake.log)"; }
    ninja -C "$BUILD" -j"$JOBS" tally || die "building libtally failed"
fi
[[ -f $BUILD/libtally.so ]] || die "no $BUILD/libtally.so (build it, or drop --no-build)"
c++ -std=c++17 -O2 -ffp-contract=off -Wall -Wextra -Wno-unused-parameter \
    -I"$ROOT/include" -I"$ROOT/runtime/include" -I"$ROOT/apps" \
    "$ROOT/test/gpu/cuda_check.cpp" "$ROOT/apps/gpu_gpu_cpu/reference.cpp" \
    "$ROOT/apps/blur_gpu/reference.cpp" "$ROOT/apps/bounce/reference.cpp" \
    -L"$BUILD" -ltally -Wl,-rpath,"$BUILD" -o "$BUILD/cuda_check" || die "building cuda_check failed"
step_done "build" "$t"

# ---- 3. the checks ------------------------------------------------------------------------------
STATUS=0
t=$(date +%s)
echo
echo "==== cuda_check (host-cuda, host-cuda-profile)"
timeout 180 "$BUILD/cuda_check" --src "$ROOT"
rc=$?
case $rc in
0) ;;
2) die "CUDA is unusable (see cuda_check's message above)" ;;
124) echo "cuda_check: timed out after 180 s"; STATUS=1 ;;
*) STATUS=1 ;;
esac
step_done "cuda_check" "$t"

# ---- 4. compute-sanitizer -----------------------------------------------------------------------
SANITIZER=$(command -v compute-sanitizer || true)
[[ -z $SANITIZER && -x /usr/local/cuda/bin/compute-sanitizer ]] && SANITIZER=/usr/local/cuda/bin/compute-sanitizer
if [[ $DO_SANITIZER == 1 && -n $SANITIZER ]]; then
    for tool in memcheck racecheck; do
        t=$(date +%s)
        args=(--src "$ROOT" --quick)
        [[ $tool == racecheck ]] && args+=(--only kernels)
        echo
        echo "==== compute-sanitizer --tool $tool cuda_check ${args[*]}"
        timeout 120 "$SANITIZER" --tool "$tool" --error-exitcode 3 "$BUILD/cuda_check" "${args[@]}" \
            >"$BUILD/sanitizer-$tool.log" 2>&1
        rc=$?
        grep -E "^========= (ERROR SUMMARY|RACECHECK SUMMARY)|^========= (Invalid|Race|Error)" \
            "$BUILD/sanitizer-$tool.log" | head -20
        tail -3 "$BUILD/sanitizer-$tool.log"
        if [[ $rc != 0 ]]; then
            echo "compute-sanitizer --tool $tool: exit $rc (log: $BUILD/sanitizer-$tool.log)"
            STATUS=1
        fi
        step_done "compute-sanitizer $tool" "$t"
    done
elif [[ $DO_SANITIZER == 1 ]]; then
    echo
    echo "compute-sanitizer not found: skipped"
fi

# ---- 5. summary -----------------------------------------------------------------------------------
echo
echo "==== summary"
for s in "${STEPS[@]}"; do
    echo "  $s"
done
TOTAL=$(($(date +%s) - START))
echo "  total                              ${TOTAL}s"
if ((TOTAL > 300)); then
    echo "  (over the 5-minute budget)"
fi
if [[ $STATUS == 0 ]]; then
    echo "cuda_check.sh: PASSED"
else
    echo "cuda_check.sh: FAILED"
fi
exit $STATUS
