#!/usr/bin/env bash
# Rebuilds one Halide version's conformance corpus and rewrites test/conformance/halide<V>/ from
# it (tools/halide14/regenerate.sh and tools/halide21/regenerate.sh call this).
#   tools/corpus/regenerate.sh VERSION [BUILD_DIR]     (default: build/, configured with CMake)
# Needs that Halide where CMake looks for it (tools/halide<V>/CMakeLists.txt). Deterministic: a
# second run leaves no git diff. The corpus's xfail.txt is not touched; a pipeline folder whose
# pipeline no longer exists is removed.
set -euo pipefail
V="${1:?usage: regenerate.sh VERSION [BUILD_DIR]}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${2:-$ROOT/build}"
DEST="$ROOT/test/conformance/halide$V"

if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DPython3_EXECUTABLE=/usr/bin/python3 >/dev/null
fi
TOOLS="$BUILD/tools/halide$V"
if ! cmake --build "$BUILD" -j "${TALLY_JOBS:-2}" --target "halide${V}_corpus" \
    "halide${V}_reference_maker"; then
    echo "regenerate.sh: error: no Halide $V corpus tools in $BUILD (was Halide $V found when" \
        "it was configured?)" >&2
    exit 1
fi
GEN="$TOOLS/corpus/gen"
mapfile -t names < <("$TOOLS/halide${V}_corpus_generator" --list)

# Remove folders of pipelines that are gone, then rewrite every pipeline's folder with the
# variants its spec lists (lowered, conceptual, GPU).
mkdir -p "$DEST"
for d in "$DEST"/*/; do
    [[ -d "$d" ]] || continue
    n="$(basename "$d")"
    if [[ -f "$d/manifest.json" ]] && ! printf '%s\n' "${names[@]}" | grep -qx "$n"; then
        rm -rf "$d"
    fi
done
for n in "${names[@]}"; do
    rm -rf "${DEST:?}/$n"
    mkdir -p "$DEST/$n"
    read -r -a variants < <(awk '$1 == "variants" || $1 == "gpu" { $1 = ""; printf "%s", $0 " " } END { print "" }' \
        "$GEN/$n.spec")
    for v in "${variants[@]}"; do
        for f in "$GEN/$n.$v.stmt" "$GEN/$n.$v.conceptual.stmt"; do
            if [[ -f "$f" ]]; then
                cp "$f" "$DEST/$n/"
            fi
        done
    done
done
"$TOOLS/halide${V}_reference_maker" "$TOOLS/corpus/libhalide${V}_corpus.so" "$GEN" "$DEST" \
    "${names[@]}"
echo "regenerate.sh: wrote ${#names[@]} pipelines to $DEST ($(du -sh "$DEST" | cut -f1))"
