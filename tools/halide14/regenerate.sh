#!/usr/bin/env bash
# Rebuilds the Halide 14 conformance corpus and rewrites test/conformance/<pipeline>/ from it.
#   tools/halide14/regenerate.sh [BUILD_DIR]     (default: build/, configured with CMake)
# Needs Halide 14 (Debian's libhalide14-0-dev). Deterministic: a second run leaves no git diff.
# The harness's own files in test/conformance/ (CMakeLists.txt, check.py, xfail.txt, README.md,
# extern_stages.c) are not touched; a pipeline folder whose pipeline no longer exists is removed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-$ROOT/build}"
DEST="$ROOT/test/conformance"

if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DPython3_EXECUTABLE=/usr/bin/python3 >/dev/null
fi
cmake --build "$BUILD" -j "${TALLY_JOBS:-2}" --target halide14_corpus halide14_reference_maker
TOOLS="$BUILD/tools/halide14"
if [[ ! -x "$TOOLS/halide14_corpus_generator" ]]; then
    echo "regenerate.sh: error: Halide 14 was not found when $BUILD was configured" >&2
    exit 1
fi
GEN="$TOOLS/corpus/gen"
mapfile -t names < <("$TOOLS/halide14_corpus_generator" --list)

# Remove folders of pipelines that are gone, then rewrite every pipeline's folder.
for d in "$DEST"/*/; do
    n="$(basename "$d")"
    if [[ -f "$d/manifest.json" ]] && ! printf '%s\n' "${names[@]}" | grep -qx "$n"; then
        rm -rf "$d"
    fi
done
for n in "${names[@]}"; do
    rm -rf "${DEST:?}/$n"
    mkdir -p "$DEST/$n"
    for v in host profile debug strict; do
        if [[ -f "$GEN/$n.$v.stmt" ]]; then
            cp "$GEN/$n.$v.stmt" "$DEST/$n/"
        fi
    done
done
"$TOOLS/halide14_reference_maker" "$TOOLS/corpus/libhalide14_corpus.so" "$GEN" "$DEST" "${names[@]}"
echo "regenerate.sh: wrote ${#names[@]} pipelines to $DEST ($(du -sh "$DEST" | cut -f1))"
