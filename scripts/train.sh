#!/usr/bin/env bash
# Sets up .venv (scripts/setup.sh) and runs an experiment. With no arguments it trains
# the default experiment (DQN on gpurl's native CartPole, about 2 minutes on 2 CPU
# cores); any Hydra override can follow, e.g. `bash scripts/train.sh experiment=sac_pendulum`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m gpurl.train "$@"
