"""How far runs are: `python -m gpurl.status [PATH ...]`.

    python -m gpurl.status                       # every run under runs/ and multirun/
    python -m gpurl.status runs/record/minatar_breakout_dqn_s0-4
    python -m gpurl.status multirun/2026-11-29 --json

A run writes RUN_DIR/progress.json at its start, at every log interval and after every
evaluation (trainers/reporting.ProgressFile), and summary.json when it ends or stops on
a signal. For each run found under the PATHs (run directories, or folders holding them)
this prints one row: its state, frames done of the total, frames/s over its last log
interval (wall time, its evaluations included), the time left at that pace, its latest
evaluation (each run's too, with N seeds in one process), the mean return of its last
100 or more training episodes at its last log (the exploring policy's: the figure the
MinAtar paper reports; with N seeds, over all of theirs) and how long ago it last wrote.
States:

    running     its process is alive (this machine) and the run has not ended
    ended       summary.json says it reached trainer.total_frames or stop_at_return
    stopped     summary.json says a signal stopped it: the same command with
                trainer.resume=auto (or record_learning.py --resume) continues it
    not running no live process and no summary since its last write: killed (SIGKILL,
                out of memory, a machine that went down); resumable from its last
                checkpoint, if it wrote one
    on HOST     written on another machine (a cluster node), whose processes this one
                cannot see: how long ago it last wrote tells whether it goes on

--json prints one JSON record per run instead. A PATH that does not exist stops with one
line and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from pathlib import Path

DEFAULT_PATHS = ("runs", "multirun")


def find_runs(paths) -> list[Path]:
    """The run directories (those holding progress.json) at or under `paths`."""
    found = []
    for path in map(Path, paths):
        if (path / "progress.json").is_file():
            found.append(path)
        elif path.is_dir():
            found += sorted(p.parent for p in path.rglob("progress.json"))
    return found


def alive(pid) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def read_json(path: Path) -> dict | None:
    """The file's JSON object, or None where it is missing or not whole (a summary
    caught while it is being written)."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def run_status(run_dir: Path, now: float | None = None) -> dict:
    """One run's record: progress.json's fields, its state and the time left."""
    now = time.time() if now is None else now
    progress = read_json(run_dir / "progress.json") or {}
    summary_path = run_dir / "summary.json"
    summary = None
    # a summary older than the progress file is an earlier stop of a resumed run
    if summary_path.is_file() and summary_path.stat().st_mtime >= (
        (run_dir / "progress.json").stat().st_mtime - 1
    ):
        summary = read_json(summary_path)
    frames, total = progress.get("frames", 0), progress.get("total_frames")
    if not progress:
        state = "unreadable progress.json"
    elif summary is not None and summary.get("stopped") == "signal":
        state = f"stopped ({summary.get('signal', 'signal')})"
    elif summary is not None:
        state = "ended"
    elif progress.get("host", socket.gethostname()) != socket.gethostname():
        state = f"on {progress['host']}"  # its process cannot be looked up from here
    elif alive(progress.get("pid")):
        state = "running"
    else:
        state = "not running"
    rate = progress.get("frames_per_s")
    left = None
    if state == "running" and rate and total is not None and total > frames:
        left = (total - frames) / rate
    return {
        "run": str(run_dir),
        "state": state,
        "frames": frames,
        "total_frames": total,
        "frames_per_s": rate,
        "seconds_left": None if left is None else round(left),
        "eval_frames": progress.get("eval_frames"),
        "eval_return": progress.get("eval_return"),
        "run_eval_returns": progress.get("run_eval_returns"),
        "train_return": progress.get("train_return"),
        "train_return_episodes": progress.get("train_return_episodes"),
        "updated": progress.get("updated"),
        "seconds_since_update": round(now - progress.get("updated_unix", now)),
    }


def duration(seconds) -> str:
    if seconds is None:
        return "-"
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds / 3600:.1f} h"


def _ret(x) -> str:
    return "-" if x is None else f"{x:.1f}"  # progress.json writes no NaN: None instead


def table(records: list[dict]) -> str:
    head = [
        "run", "state", "frames", "frames/s", "left", "last evaluation",
        "last 100 training episodes", "written",
    ]  # fmt: skip
    rows = []
    for r in records:
        total = r["total_frames"]
        done = f"{r['frames']:,}"
        if total:
            done += f" / {total:,} ({100 * r['frames'] / total:.0f}%)"
        ev = "-"
        if r["eval_frames"] is not None:
            ev = f"{_ret(r['eval_return'])} at {r['eval_frames']:,}"
            if r["run_eval_returns"]:
                ev += f" (runs: {', '.join(_ret(x) for x in r['run_eval_returns'])})"
        rate = r["frames_per_s"]
        rows.append(
            [
                r["run"],
                r["state"],
                done,
                "-" if rate is None else f"{rate:,.0f}",
                duration(r["seconds_left"]),
                ev,
                _ret(r["train_return"]),
                f"{duration(r['seconds_since_update'])} ago",
            ]
        )
    widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=True)]

    def line(cells, sep=" | "):
        return sep.join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    rule = line(["-" * w for w in widths], sep="-+-")
    return "\n".join([line(head), rule, *map(line, rows)])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("paths", nargs="*", help="run directories or folders holding them")
    p.add_argument("--json", action="store_true", help="one JSON record per run")
    args = p.parse_args(argv)
    paths = args.paths or [d for d in DEFAULT_PATHS if Path(d).is_dir()]
    missing = [x for x in args.paths if not Path(x).exists()]
    if missing:
        print(f"gpurl.status: error: no such path: {missing[0]}", file=sys.stderr)
        return 2
    records = [run_status(d) for d in find_runs(paths)]
    if not records:
        where = ", ".join(map(str, paths)) or "runs/ or multirun/ (neither exists here)"
        print(f"no runs with a progress.json under {where}")
        return 0
    if args.json:
        for r in records:
            print(json.dumps(r))
    else:
        print(table(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
