#!/usr/bin/env bash
# The two commands a newcomer needs on a fresh Debian 12 machine:
#   ./run.sh demo   install what is missing, build everything, run the main demo
#   ./run.sh test   install what is missing, build everything, run every test (ctest)
# Other subcommands: deps (install only), build, format-check, tsan (runtime tests under TSan),
# asan (unit, ir, runtime and e2e tests under ASan + UBSan), fuzz [SECONDS] (every fuzzer, SECONDS each).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD="${TALLY_BUILD_DIR:-$ROOT/build}"
JOBS="${TALLY_JOBS:-$(nproc)}"

# The Debian packages Tally builds and tests with (ARCHITECTURE.md, "Dependencies").
PACKAGES=(llvm-19-dev llvm-19-tools clang-19 libclang-rt-19-dev libzstd-dev libvulkan-dev
  mesa-vulkan-drivers vulkan-tools vulkan-validationlayers glslang-tools glslang-dev spirv-tools
  libshaderc-dev python3-pybind11 pybind11-dev python3-numpy python3-pytest python3-dev
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev ninja-build cmake clang-format-14
  zlib1g-dev golang-go chromium python3-venv ocl-icd-libopencl1 pocl-opencl-icd opencl-c-headers
  clinfo)

# The profile viewer the tests open the exports in (test/viewers): speedscope, an npm package
# pinned in test/viewers/package-lock.json and installed into test/viewers/node_modules (ignored by
# git) from the registry with npm. Node.js and npm come from Debian's nodejs and npm packages
# unless the machine already has an npm.
VIEWERS="$ROOT/test/viewers"

# Python packages from PyPI (Halide 21, CUDA's ptxas and libdevice), pinned in
# tools/python-requirements.txt and installed into this virtual environment (ignored by git).
# It sees the system's packages too (pytest, pybind11), its pins shadow them.
VENV="${TALLY_VENV:-$ROOT/.venv}"

log() { printf '==> %s\n' "$*" >&2; }

deps() {
    local missing=()
    for p in "${PACKAGES[@]}"; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
            missing+=("$p")
        fi
    done
    if ! command -v npm >/dev/null; then
        missing+=(nodejs npm)
    fi
    if ((${#missing[@]} != 0)); then
        log "installing: ${missing[*]}"
        local sudo=()
        if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
        "${sudo[@]}" apt-get update -q
        DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends \
            "${missing[@]}"
    fi
    viewer_deps
    python_deps
}

# The pinned Python packages, unless the environment already holds exactly those pins.
python_deps() {
    local req="$ROOT/tools/python-requirements.txt" stamp="$VENV/tally-requirements.txt"
    if [[ -f $stamp ]] && cmp -s "$req" "$stamp"; then
        return 0
    fi
    log "installing the pinned Python packages of $req into $VENV (pip)"
    /usr/bin/python3 -m venv --system-site-packages "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$req"
    cp "$req" "$stamp"
}

# speedscope at the version package-lock.json pins, unless it is there already.
viewer_deps() {
    local want have=""
    want=$(sed -n 's/^ *"speedscope": "\(.*\)"$/\1/p' "$VIEWERS/package.json")
    if [[ -f $VIEWERS/node_modules/speedscope/package.json ]]; then
        have=$(sed -n 's/^ *"version": "\(.*\)",$/\1/p' \
            "$VIEWERS/node_modules/speedscope/package.json")
    fi
    if [[ $have == "$want" ]]; then
        return 0
    fi
    log "installing speedscope $want into $VIEWERS/node_modules (npm ci)"
    (cd "$VIEWERS" && npm ci --no-audit --no-fund --loglevel=error)
}

configure() {
    local dir="$1"
    shift
    cmake -S "$ROOT" -B "$dir" -G Ninja -DPython3_EXECUTABLE=/usr/bin/python3 \
        -DTALLY_VENV="$VENV" "$@" >/dev/null
}

build() {
    configure "$BUILD"
    log "building in $BUILD"
    cmake --build "$BUILD" -j "$JOBS"
}

format_check() {
    log "checking formatting (clang-format-14)"
    local files
    mapfile -t files < <(cd "$ROOT" && git ls-files '*.h' '*.c' '*.cpp' | grep -v '^test/ir/')
    (cd "$ROOT" && clang-format-14 --dry-run --Werror "${files[@]}")
}

tsan() {
    local dir="$BUILD-tsan"
    configure "$dir" -DTALLY_SANITIZE=thread -DTALLY_BUILD_BENCH=OFF
    log "building runtime tests under ThreadSanitizer in $dir"
    # Everything under test/runtime: those tests link only the runtime, so no LLVM is rebuilt.
    cmake --build "$dir" -j "$JOBS" --target test/runtime/all
    # Left out: the rerun under the Khronos validation layer (third-party, not instrumented),
    # which races inside itself under TSan (its std::thread-based queue checks against Tally's
    # fence reclaim; docs/reliability.md); that run is covered by the main test pass.
    (cd "$dir" && TSAN_OPTIONS="halt_on_error=1:suppressions=$ROOT/test/tsan.supp" ctest -L runtime \
        -E "^runtime\.vulkan\.validation$" \
        --output-on-failure -j "$JOBS")
}

# Unit, ir, runtime and e2e tests under AddressSanitizer + UndefinedBehaviorSanitizer, in their own
# build folder (-O1 -g1: half the compile time of -O2 -g, still symbolized). Only Tally's code is
# instrumented (LLVM is linked into libtally.so as built by Debian). Left out, and run by the
# plain build instead: the tests that throw a CompileError out of parser recursion more than
# 64 MiB deep, where GCC 12's ASan cannot unpoison the stack and then reports a false
# stack-buffer-overflow in its own sigaltstack call (google/sanitizers#189; the clang-built fuzzer
# runs the same inputs cleanly).
# The Halide bridge (src/halide) is left out of this build: it links Halide 21's libHalide.so,
# which is not instrumented, and its tests (label halide) run in the plain build.
asan() {
    local dir="$BUILD-asan"
    # GCC's -Wmaybe-uninitialized misfires under -fsanitize=address on LLVM's inlined headers
    # (APInt in std::optional<ConstantRange>); the plain build keeps the warning as an error.
    configure "$dir" -DTALLY_SANITIZE=address,undefined -DTALLY_BUILD_BENCH=OFF \
        -DTALLY_BUILD_PYTHON=OFF -DTALLY_HALIDE_BRIDGE=OFF -DCMAKE_CXX_FLAGS=-Wno-maybe-uninitialized \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
        -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG"
    log "building under AddressSanitizer + UBSan in $dir"
    cmake --build "$dir" -j "$JOBS"
    log "running the unit, ir, runtime and e2e tests under AddressSanitizer + UBSan"
    # Mesa's lavapipe keeps one 128-byte allocation (made with realloc) reachable from its own
    # globals for the life of the process; the Vulkan loader unloads lavapipe when the instance
    # is destroyed, after which LeakSanitizer no longer sees that reference and reports the block
    # as a direct leak in an "<unknown module>" (seen with mesa-vulkan-drivers 22.3.6-1+deb12u2,
    # on every Vulkan test, also on code from before it changed). Preloading the driver keeps it
    # mapped to the end, so LSan sees the block reachable; Tally's code, in the executables and
    # their libraries, stays checked (an ASan program that leaks still reports it with this
    # preload). The preload comes before ASan's runtime in the library list, hence
    # verify_asan_link_order=0; ASan's allocator still interposes (it is linked first).
    local preload=() link_order=""
    local lvp=/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so
    if [[ -f $lvp ]]; then
        preload=(LD_PRELOAD="$lvp")
        link_order=":verify_asan_link_order=0"
    fi
    (cd "$dir" && env "${preload[@]}" ASAN_OPTIONS="detect_leaks=1:halt_on_error=1$link_order" \
        LSAN_OPTIONS="suppressions=$ROOT/test/lsan.supp:print_suppressions=0" \
        UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" MESA_SHADER_CACHE_DISABLE=true \
        ctest --output-on-failure -j "$JOBS" -L 'unit|ir|runtime|e2e' \
        -E '^IRParser\.Deep(Parentheses|StatementNesting)|Kept\.(Input|Lowering)/deep_')
}

# The fuzzers (test/fuzz/run_fuzz.sh: parser, lowering, profiler report, .npy reader): clang-19
# + libFuzzer, ASan, UBSan, each for TALLY_FUZZ_SECONDS (default 30) or the given number of
# seconds.
fuzz() {
    TALLY_FUZZ_BUILD_DIR="$BUILD-fuzz" TALLY_JOBS="$JOBS" \
        "$ROOT/test/fuzz/run_fuzz.sh" "${1:-${TALLY_FUZZ_SECONDS:-30}}"
}

demo() {
    build
    log "demo: a Halide pipeline profiled by Tally (apps/halide/blur.py): the 3x3 blur written with"
    log "Halide 21's Python API, compiled by Tally for host-profile and run 50 times on a 2048x1536"
    log "image; the profiler prints its report when the process exits"
    PYTHONPATH="$BUILD/python" MESA_SHADER_CACHE_DISABLE=true \
        "$VENV/bin/python" "$ROOT/apps/halide/blur.py" --size 2048x1536 --runs 50
}

test_all() {
    format_check
    build
    log "running every test"
    (cd "$BUILD" && MESA_SHADER_CACHE_DISABLE=true ctest --output-on-failure -j "$JOBS")
    if [[ "${TALLY_SKIP_TSAN:-0}" != 1 ]]; then
        tsan
    fi
    if [[ "${TALLY_SKIP_ASAN:-0}" != 1 ]]; then
        asan
    fi
    if [[ "${TALLY_SKIP_FUZZ:-0}" != 1 ]]; then
        fuzz
    fi
}

cmd="${1:-}"
case "$cmd" in
deps) deps ;;
build) deps && build ;;
demo) deps && demo ;;
test) deps && test_all ;;
format-check) format_check ;;
tsan) deps && tsan ;;
asan) deps && asan ;;
fuzz) deps && fuzz "${2:-}" ;;
*)
    echo "usage: $0 {demo|test|build|deps|format-check|tsan|asan|fuzz [SECONDS]}" >&2
    exit 2
    ;;
esac
