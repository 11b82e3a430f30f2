#!/usr/bin/env bash
# Fetch into .whl/ the wheels a bare GPU machine (Python 3.12, x86-64, torch already there,
# no network) lacks to run gpurl: scripts/gpu_check.sh installs them there from .whl/.
# Run here, in the repo root, with the venv's pip (bash scripts/setup.sh first); the
# versions are the ones this checkout's venv holds. antlr4-python3-runtime has no wheel on
# the index: pip builds one (pure Python).
set -euo pipefail
PY=${PY:-.venv/bin/python}
mkdir -p .whl
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >>.git/info/exclude
version() { "$PY" -m pip show "$1" 2>/dev/null | awk '/^Version:/{print $2}'; }
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 any; do
  platforms+=(--platform "$p")
done
for name in torchrl tensordict hydra-core omegaconf pyvers hoptorch orjson importlib_metadata \
  zipp gymnasium farama-notifications; do
  v=$(version "$name")
  [[ -n $v ]] || { echo "gpu_wheels: $name is not in $PY's environment" >&2; exit 1; }
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${platforms[@]}" -d .whl "$name==$v"
done
"$PY" -m pip wheel -q --no-deps -w .whl "antlr4-python3-runtime==$(version antlr4-python3-runtime)"
ls .whl
du -sh .whl
