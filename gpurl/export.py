"""Export a run's greedy policy for use without gpurl: `python -m gpurl.export RUN_DIR`.

    python -m gpurl.export runs/2026-11-26/10-00-00_dqn_cartpole_s0
    python -m gpurl.export RUN_DIR --checkpoint last --out policy.pt2 --observations 5000
    python -m gpurl.export RUN_DIR --onnx      # policy.onnx too (pip install -e '.[export]')

It writes a torch.export program (default RUN_DIR/export/policy.pt2) taking the
observation entries (a batch of any size) and returning the greedy action, and
policy.json beside it (the entries' keys, shapes and dtypes, the action's, the run and
checkpoint), after checking that the program's actions equal the run's policy's on
`--observations` observations recorded from the env (1,000 by default). torch alone
loads and runs it: examples/run_exported.py. With --onnx it writes policy.onnx beside
it too, checked in onnxruntime on the same observations (discrete actions equal,
continuous ones within 1e-5): examples/run_exported_onnx.py. A policy whose ops do not
export, or whose exported actions differ, stops with one line and exit status 2, and
nothing is written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpurl.errors import ConfigError
from gpurl.trained import CHECKPOINTS, TrainedPolicy, export


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m gpurl.export",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run_dir", help="a gpurl run directory")
    p.add_argument("--checkpoint", default="last", choices=CHECKPOINTS)
    p.add_argument("--out", type=Path, default=None, help="default: RUN_DIR/export/policy.pt2")
    p.add_argument(
        "--observations", type=int, default=1000, help="recorded observations to check on"
    )
    p.add_argument("--onnx", action="store_true", help="an ONNX model beside the program")
    args = p.parse_args(argv)
    out = args.out or Path(args.run_dir) / "export" / "policy.pt2"
    try:
        trained = TrainedPolicy(args.run_dir, args.checkpoint)
        meta = export(trained, out, args.observations, onnx=args.onnx)
    except ConfigError as err:
        print(f"gpurl: error: {err}", file=sys.stderr)
        return 2
    print(f"equal actions on {meta['checked_observations']} recorded observations")
    print(out)
    if meta["onnx"]:
        print(out.with_suffix(".onnx"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
