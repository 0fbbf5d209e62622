#!/usr/bin/env bash
# Rebuilds the Halide 14 conformance corpus and rewrites test/conformance/halide14/ from it.
#   tools/halide14/regenerate.sh [BUILD_DIR]     (default: build/, configured with CMake)
# Needs Halide 14 (Debian's libhalide14-0-dev). Deterministic: a second run leaves no git diff.
exec "$(dirname "${BASH_SOURCE[0]}")/../corpus/regenerate.sh" 14 "$@"
