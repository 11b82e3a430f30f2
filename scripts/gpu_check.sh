#!/usr/bin/env bash
# The checks a lent GPU machine runs (see README "GPU"): the CUDA tests, the
# set_sync_debug_mode("error") runs of every agent, and the GPU benchmarks, each
# benchmark record appended to $OUT/bench_gpu.jsonl, and torchrun runs with one rank
# per GPU (`torchrun`). Run from the repo root on a machine whose python3 has torch with
# CUDA; wheels it lacks travel in .whl/.
set -uo pipefail
OUT=${OUT:-/tmp/gpurl_gpu}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
python3 -c "import torch, torchrl, tensordict; print(torch.__version__, torchrl.__version__, tensordict.__version__, torch.cuda.get_device_name())"
what=${1:-all}
if [[ $what == all || $what == tests ]]; then
  # every test that runs on CUDA, then the fast suite
  python3 -m pytest -q -p no:cacheprovider -p no:logging -k "cuda or sync or cudagraph" tests 2>&1 | tee "$OUT/tests_cuda.log" | tail -15
  python3 -m pytest -q -p no:cacheprovider -p no:logging -m "not slow" -n 8 tests 2>&1 | tee "$OUT/tests_fast.log" | tail -6
fi
if [[ $what == all || $what == bench ]]; then
  B="$OUT/bench_gpu.jsonl"
  python3 tools/bench_collect.py --device cuda --num-envs 64 1024 16384 --repeats 3 | tee -a "$B"
  python3 tools/bench_priority.py --device cuda --sizes 100000 1000000 | tee -a "$B"
  python3 tools/bench_compile.py --what agents --device cuda | tee -a "$B"
  # end-to-end pixel training against its floor, eager / compiled / CUDA graphs (issue 13)
  python3 tools/bench_train.py --device cuda --num-envs 1024 4096 16384 --rollout-steps 8 \
    --modes eager compile cudagraphs --max-mem-delta 0 | tee -a "$B"
fi
if [[ $what == all || $what == torchrun ]]; then
  # one rank per GPU (issue 14): SAC Pendulum and IQN MarineNav, frames/s in summary.json
  n=$(nvidia-smi -L | wc -l)
  for preset in sac_pendulum marinenav_iqn; do
    python3 -m torch.distributed.run --nproc-per-node "$n" -m gpurl.train experiment=$preset \
      device=cuda trainer.progress=false hydra.run.dir="$OUT/torchrun_${preset}_x$n" 2>&1 | tail -2
  done
fi
