#!/usr/bin/env bash
# Creates (or reuses) .venv inside the checkout and installs gpurl with its test and
# launcher extras, the stats and docs extras and the optional envs' extras (envpool, dmc, vmas),
# so their tests run rather than skip. Torch goes in first: the project's range
# (torch>=2.11) is satisfied by the local CPU build, so pip never pulls the multi-GB
# CUDA wheels. Set GPURL_TORCH to another requirement (e.g. "torch==2.11.0") on a
# machine that has a CUDA build to offer.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
VPY=.venv/bin/python
if ! "$VPY" -c "import torch" >/dev/null 2>&1; then
  "$VPY" -m pip install -q "${GPURL_TORCH:-torch==2.13.0}"
fi
# Reinstall only when pyproject.toml changed since the last successful install.
stamp=.venv/.gpurl-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  "$VPY" -m pip install -q -e ".[dev,launchers,stats,docs,envpool,dmc,mujoco,vmas]"
  touch "$stamp"
fi
