#!/usr/bin/env bash
# Sets up .venv (scripts/setup.sh) and runs the whole test suite: the fast tests and the
# learning checks marked `slow`. Extra arguments go to pytest (e.g. -m "not slow").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q "$@"
