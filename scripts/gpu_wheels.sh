#!/usr/bin/env bash
# Fetch into .whl/ the wheels a bare GPU machine (Python 3.12, x86-64, torch and
# torchvision already there, no network) lacks to run gpurl, and into .whl/benchmarl/
# those of BenchMARL's side of `bench_peers.py vmas` (it pins torchrl < 0.12, so it gets a
# site of its own). scripts/gpu_check.sh installs both there. Run here, in the repo root,
# after `bash scripts/setup.sh`: gpurl's side takes the versions this checkout's venv
# holds. Packages published only as source (antlr4-python3-runtime, vmas, gym,
# benchmarl) are pure Python: pip builds their wheels here.
set -euo pipefail
PY=${PY:-.venv/bin/python}
mkdir -p .whl/benchmarl
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >>.git/info/exclude
version() { "$PY" -m pip show "$1" 2>/dev/null | awk '/^Version:/{print $2}'; }
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 any; do
  platforms+=(--platform "$p")
done
# fetch DIR REQUIREMENT: a cp312 x86-64 wheel, or one built here from a pure-Python sdist
fetch() {
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${platforms[@]}" -d "$1" "$2" 2>/dev/null ||
    "$PY" -m pip wheel -q --no-deps -w "$1" "$2"
}
# gpurl: TorchRL, tensordict, Hydra and what they need; Gymnasium; VMAS and what it needs
for name in torchrl tensordict hydra-core omegaconf antlr4-python3-runtime pyvers hoptorch \
  orjson importlib_metadata zipp gymnasium farama-notifications vmas gym gym-notices pyglet; do
  v=$(version "$name")
  [[ -n $v ]] || { echo "gpu_wheels: $name is not in $PY's environment" >&2; exit 1; }
  fetch .whl "$name==$v"
done
# BenchMARL 1.5.2 (tools/bench_peers.py), on TorchRL 0.11 and tensordict 0.11
for req in benchmarl==1.5.2 "torchrl>=0.11,<0.12" "tensordict>=0.11,<0.12" vmas==1.5.2 \
  gym==0.26.2 gym-notices==0.0.8 pyglet==1.5.27 "hydra-core==$(version hydra-core)" \
  "omegaconf==$(version omegaconf)" "antlr4-python3-runtime==$(version antlr4-python3-runtime)" \
  "pyvers==$(version pyvers)" "orjson==$(version orjson)" \
  "importlib_metadata==$(version importlib_metadata)" "zipp==$(version zipp)"; do
  fetch .whl/benchmarl "$req"
done
ls .whl .whl/benchmarl
du -sh .whl
