#!/usr/bin/env bash
# Rebuilds the Halide 21 conformance corpus and rewrites test/conformance/halide21/ from it.
#   tools/halide21/regenerate.sh [BUILD_DIR]     (default: build/, configured with CMake)
# Needs Halide 21 from PyPI in .venv (./run.sh deps). Deterministic: a second run leaves no git
# diff.
exec "$(dirname "${BASH_SOURCE[0]}")/../corpus/regenerate.sh" 21 "$@"
