#!/usr/bin/env bash
# Sets up .venv (scripts/setup.sh), builds the documentation site with
# `mkdocs build --strict` into a temporary folder (a broken link or API reference fails
# it), then runs the whole test suite: the fast tests and the learning checks marked
# `slow`, in GPURL_TEST_WORKERS processes (2: one per core of the CI machine), each test
# file in one of them (pytest-xdist's --dist loadfile: a file's tests and fixtures stay
# together). Extra arguments go to pytest (e.g. -m "not slow").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
site=$(mktemp -d)
trap 'rm -rf "$site"' EXIT
NO_MKDOCS_2_WARNING=1 .venv/bin/python -m mkdocs build --strict --quiet --site-dir "$site"
.venv/bin/python -m pytest -q -n "${GPURL_TEST_WORKERS:-2}" --dist loadfile "$@"
