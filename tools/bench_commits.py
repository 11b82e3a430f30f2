"""One benchmark tool run at two commits, alternately, in one sitting: is a change free?

    python tools/bench_commits.py --before 67e5426 --after HEAD --metric fps -- \
        tools/bench_env.py cartpole --num-envs 1024 --threads 1

Each commit is checked out into a temporary git worktree and the tool (a path inside the
repository, then its arguments) runs as its own process from that worktree, with that
worktree's gpurl first on the path: the tool as it was at that commit, against the code
as it was. The two sides alternate, in the order before, after, after, before, ... so a
drift of the machine's speed falls on both. Every JSON record the tool prints comes out
again with "side" (before / after), "rev" (as given), "rev_commit" (the commit it
named), "round" and "tool_args" added.
With --metric NAME (a numeric field of the records, e.g. fps, ms_per_step), a last
record gives per matching record the median of that field on each side and the median
of the after/before ratios of the rounds: >1 means after is higher.

Time it alone: other processes on the machine move the figures more than most changes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.common import pythonpath  # noqa: E402


def checkout(rev: str, into: Path) -> Path:
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(into), rev], check=True
    )
    return into


def resolve(rev: str) -> str:
    out = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", rev], capture_output=True, text=True
    )
    if out.returncode != 0:
        raise SystemExit(f"bench_commits: unknown revision {rev!r}")
    return out.stdout.strip()


def remove(worktree: Path) -> None:
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(worktree)], check=False
    )


def run_tool(worktree: Path, tool: list[str]) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": pythonpath(worktree)}
    out = subprocess.run(
        [sys.executable, *tool], cwd=worktree, env=env, capture_output=True, text=True
    )
    if out.returncode != 0:
        tail = out.stderr.strip().splitlines()[-3:]
        raise SystemExit(f"bench_commits: {tool[0]} failed in {worktree}: {' | '.join(tail)}")
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def case_key(record: dict) -> str:
    """What tells a tool's records of one run apart (env, agent, mode, num_envs, at the
    top level or in a "config" entry)."""
    fields = {**record.get("config", {}), **record}
    parts = [f"{k}={fields[k]}" for k in ("env", "agent", "mode", "num_envs") if k in fields]
    return " ".join(parts) or "all"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--before", required=True, help="a git revision")
    p.add_argument("--after", default="HEAD", help="a git revision (default HEAD)")
    p.add_argument("--rounds", type=int, default=3, help="runs of the tool per side")
    p.add_argument("--metric", default=None, help="a numeric record field to summarise")
    p.add_argument("tool", nargs=argparse.REMAINDER, help="-- TOOL.py [ARGS]")
    args = p.parse_args(argv)
    tool = args.tool[1:] if args.tool[:1] == ["--"] else args.tool
    if not tool:
        p.error("give the tool after --, e.g. -- tools/bench_env.py cartpole")
    revs = {"before": args.before, "after": args.after}
    commits = {side: resolve(rev) for side, rev in revs.items()}
    values: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="gpurl-bench-commits-") as tmp:
        trees = {side: checkout(rev, Path(tmp) / side) for side, rev in revs.items()}
        try:
            for round_ in range(args.rounds):
                order = ["before", "after"] if round_ % 2 == 0 else ["after", "before"]
                for side in order:
                    for record in run_tool(trees[side], tool):
                        record.update(
                            side=side,
                            rev=revs[side],
                            rev_commit=commits[side],
                            round=round_,
                            tool_args=tool,
                        )
                        print(json.dumps(record), flush=True)
                        if args.metric is not None and args.metric in record:
                            key = (case_key(record), side)
                            values.setdefault(key, []).append(float(record[args.metric]))
        finally:
            for tree in trees.values():
                remove(tree)
    if args.metric is not None:
        cases = sorted({case for case, _ in values})
        summary = {}
        for case in cases:
            before, after = values.get((case, "before"), []), values.get((case, "after"), [])
            ratios = [a / b for a, b in zip(after, before, strict=False) if b]
            summary[case] = {
                "before_median": statistics.median(before) if before else None,
                "after_median": statistics.median(after) if after else None,
                "after_over_before_median": round(statistics.median(ratios), 4) if ratios else None,
            }
        print(
            json.dumps(
                {
                    "tool": "bench_commits",
                    "metric": args.metric,
                    "revs": revs,
                    "commits": commits,
                    "rounds": args.rounds,
                    "tool_args": tool,
                    "summary": summary,
                }
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
