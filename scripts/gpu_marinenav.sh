#!/usr/bin/env bash
# MarineNav presets on a lent GPU (docs/benchmarks.md#gpu): many runs at
# once, each its own process, sharing the device through CUDA MPS when the machine has
# it (small kernels from different processes then overlap; without it they take turns).
# From the repo root, in one device call or across calls made while the machine is warm:
#   bash scripts/gpu_marinenav.sh start SUFFIX PRESETS... -- SEEDS... -- OVERRIDES...
#   bash scripts/gpu_marinenav.sh wait SECONDS SUFFIX
# e.g. start _h100 marinenav_iqn marinenav_acqin -- 0 1 2 -- device=cuda compile.cudagraphs=true
# `start` launches tools/record_learning.py detached (it outlives the call); `wait`
# returns when the runs are done or after SECONDS, and packs into $OUT: the records
# (docs/bench/gpu/PRESET_sS${SUFFIX}_summary.json; a run still going leaves its
# evaluations so far, from its last checkpoint, in ..._partial.json), once all are done
# the fixed-set table of the runs beside the baselines (tools/eval_marinenav.py), and the
# checkpoints of the runs named by KEEP (globs; they are 3-10 MB each).
set -uo pipefail
OUT=${OUT:-/tmp/gpurl_gpu}
mkdir -p "$OUT" docs/bench/gpu
if ! python3 -c "import torchrl" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
LOG=/tmp/gpurl_marinenav.log
mode=$1; shift
if [[ $mode == start ]]; then
  suffix=$1; shift
  presets=(); while [[ $# -gt 0 && $1 != -- ]]; do presets+=("$1"); shift; done; shift
  seeds=(); while [[ $# -gt 0 && $1 != -- ]]; do seeds+=("$1"); shift; done; shift
  if command -v nvidia-cuda-mps-control >/dev/null && nvidia-cuda-mps-control -d &&
    python3 -c "import torch; torch.zeros(1, device='cuda').sum().item()"; then
    echo "MPS: on" | tee "$LOG"
  else
    echo quit | nvidia-cuda-mps-control 2>/dev/null
    echo "MPS: not available, the processes take turns on the GPU" | tee "$LOG"
  fi
  jobs=$(( ${#presets[@]} * ${#seeds[@]} ))
  setsid nohup python3 tools/record_learning.py "${presets[@]}" --seeds "${seeds[@]}" \
    --jobs "$jobs" --out docs/bench/gpu --suffix "$suffix" -- "$@" >>"$LOG" 2>&1 &
  echo "started $jobs runs: ${presets[*]} x seeds ${seeds[*]}"
  exit 0
fi
seconds=$1 suffix=$2
end=$(( SECONDS + seconds ))
while pgrep -f tools/record_learning.py >/dev/null && (( SECONDS < end )); do sleep 5; done
cat "$LOG"
python3 - "$suffix" <<'PY'
import json, sys
from pathlib import Path
import torch
suffix = sys.argv[1]
for run in sorted(Path("runs/record").glob(f"*{suffix}")):
    record = Path("docs/bench/gpu") / f"{run.name}_summary.json"
    ckpt = run / "checkpoints" / "last.pt"
    if record.exists() or not ckpt.exists():
        continue
    state = torch.load(ckpt, map_location="cpu", weights_only=False)
    part = {"run": run.name, "frames": state["frames"], "wall_time_s": state["wall_time"],
            "eval_log": state.get("eval_log", []), "meta": state.get("meta", {}),
            "partial": "still running; evaluations up to its last checkpoint"}
    (Path("docs/bench/gpu") / f"{run.name}_partial.json").write_text(json.dumps(part, indent=1))
    print("partial", run.name, state["frames"], round(state["wall_time"]))
PY
if ! pgrep -f tools/record_learning.py >/dev/null; then
  finished=$(for r in runs/record/*"$suffix"; do [[ -f $r/summary.json ]] && echo "$r"; done)
  timeout "${EVAL_SECONDS:-150}" python3 tools/eval_marinenav.py --device cuda \
    --runs $finished --table "$OUT/table$suffix.md" >"$OUT/eval$suffix.jsonl"
fi
tar czf "$OUT/marinenav$suffix.tgz" docs/bench/gpu runs/record/*"$suffix"/summary.json \
  runs/record/*"$suffix"/.hydra \
  $(for g in ${KEEP:-}; do ls runs/record/$g/checkpoints/last.pt 2>/dev/null; done) 2>/dev/null
ls -la "$OUT"
