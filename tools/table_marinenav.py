"""One per-stage MarineNav table from fixed-set records already written, no policy played.

tools/eval_marinenav.py plays policies and writes one JSON record per (policy, stage);
its --table groups the records of one call. This tool gathers records from several
files (runs evaluated on different devices, at different commits) into one table of
the same form, with a column for the device each record was evaluated on:

    python tools/table_marinenav.py \\
        --row docs/bench/agents/marinenav/eval_marinenav_iqn_cvar_cpu_2026-11-23.jsonl \\
            "iqn cvar 0.25" IQN \\
        --row docs/bench/gpu/eval_marinenav_h100_2026-11-23.jsonl rainbow Rainbow \\
        --device-name cpu=CPU cuda=H100 --out /tmp/t.md

Each --row FILE POLICY LABEL takes FILE's records whose "policy" is POLICY (every run
of it, one per seed) and shows them as LABEL; rows keep the order of the --row options.
The cells are eval_marinenav's: the mean over runs and, with more than one, +- their
standard deviation; travel time and energy over successful episodes, collisions and
timeouts counting robots over the stage's 10 episodes (60 for "all").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpurl.errors import ConfigError  # noqa: E402
from tools.eval_marinenav import table  # noqa: E402

STAGES = ["0", "1", "2", "3", "4", "5", "all"]


def select(path: str | Path, policy: str, label: str, names: dict[str, str]) -> list[dict]:
    """FILE's records of `policy`, relabelled `label`, their device named by `names`.
    Every run must hold the seven rows (stages 0-5 and "all") of one evaluation."""
    records = [json.loads(line) for line in Path(path).read_text().splitlines() if line]
    chosen = [r for r in records if r["policy"] == policy]
    if not chosen:
        found = sorted({r["policy"] for r in records})
        raise ConfigError(f"{path} has no records of policy '{policy}'; it has {found}")
    runs: dict[str | None, list[str]] = {}
    for r in chosen:
        runs.setdefault(r.get("run"), []).append(str(r["stage"]))
    for run, stages in runs.items():
        if stages != STAGES:
            raise ConfigError(f"{path}: '{policy}' run {run} has stages {stages}, not {STAGES}")
    return [{**r, "policy": label, "device": names.get(r["device"], r["device"])} for r in chosen]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--row",
        nargs=3,
        action="append",
        required=True,
        metavar=("FILE", "POLICY", "LABEL"),
        help="FILE's records of POLICY, shown as LABEL (repeat, in table order)",
    )
    p.add_argument(
        "--device-name",
        nargs="*",
        default=[],
        metavar="DEVICE=NAME",
        help="name a record's device in the table, e.g. cuda=H100",
    )
    p.add_argument("--out", type=Path, help="also write the table here")
    args = p.parse_args(argv)
    names = dict(item.split("=", 1) for item in args.device_name)
    records = [r for path, policy, label in args.row for r in select(path, policy, label, names)]
    text = table(records, keys=("policy", "device"))
    sys.stdout.write(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
