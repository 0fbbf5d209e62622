"""Shared fixtures of the Python binding tests.

ctest runs these with PYTHONPATH pointing at the build's python/ folder (where tally*.so lies)
and TALLY_SOURCE_DIR at the source tree; run by hand:

    PYTHONPATH=build/python /usr/bin/python3 -m pytest -q python_bindings/test
"""

import os
import pathlib

import pytest

import tally

SOURCE_DIR = pathlib.Path(
    os.environ.get("TALLY_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2])
)
APPS_DIR = SOURCE_DIR / "apps"
CORPUS_DIR = SOURCE_DIR / "test" / "corpus" / "halide14"


def app_stmt(name):
    """apps/<name>/<name>.stmt in the source tree."""
    return APPS_DIR / name / (name + ".stmt")


@pytest.fixture
def clean_profiler():
    """The profiler is process-wide: start from an empty registry, leave one behind."""
    tally.profiler.reset()
    yield
    tally.profiler.reset()
