"""GIFs of trained runs for the docs: each run evaluated again and one greedy episode drawn.

    python tools/record_gifs.py runs/record/pqn_cartpole_s0 runs/record/sac_pendulum_s0_watch
    python tools/record_gifs.py RUN ... --max-frames 120 --out docs/img/use --page docs/use.md

For each run directory, as `python -m gpurl.eval RUN --video` does (gpurl/eval.py):
its last checkpoint, evaluated greedily by the env's own protocol on `--episodes`
evaluation envs (the run's own count by default), then one greedy episode of an
evaluation copy recorded. The episode is kept whole up to --max-frames frames; a longer
one keeps every k-th frame (k the smallest that fits) and plays k times slower per
frame, so the GIF lasts as long as the episode. Episodes shorter than --min-frames
(a pixel world solved in a few steps) play one after another until it is reached, each
on the next evaluation seed. It is written as OUT/<env>_<agent>.gif.

One JSON line per run goes to stdout and to --records (default
docs/bench/use/gifs_<device>_<date>.jsonl): the run, its env, agent and preset, the
frames it trained, the evaluation's metrics, the episode's length, the GIF's frames,
stride and bytes, with commit, versions and device. With --page, the gallery between
`<!-- gallery:start -->` and `<!-- gallery:end -->` in that page is rewritten from the
records: one row per GIF, so the page shows what the records hold.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as `python tools/NAME.py`: the root holds tools/

from tools.common import emit, environment_record  # noqa: E402

MAX_EPISODES = 20  # at most, to reach --min-frames
GALLERY = ("<!-- gallery:start -->", "<!-- gallery:end -->")


def gif_of_run(
    run_dir: Path, out: Path, episodes: int | None, max_frames: int, min_frames: int
) -> dict:
    """Evaluate run_dir, record its greedy episodes as OUT/<env>_<agent>.gif; the record."""
    from gpurl import eval as gpurl_eval
    from gpurl.trained import TrainedPolicy
    from gpurl.trainers.video import FPS, record_episode, video_env, write_video

    record = gpurl_eval.evaluate(run_dir, episodes=episodes)
    trained = TrainedPolicy(run_dir)
    env_cfg = dict(trained.cfg.env)
    # short episodes (a pixel world solved in 3 steps) play one after another, each on
    # the next evaluation seed: an env with a fixed evaluation set would replay its first
    episodes = []
    while sum(len(e) for e in episodes) < min_frames and len(episodes) < MAX_EPISODES:
        env = video_env(env_cfg, "cpu", record["seed"] + len(episodes))
        episodes.append(record_episode(env, trained.policy, env.max_episode_steps, env_cfg["name"]))
        env.close()
    frames = torch.cat(episodes)
    stride = max(1, math.ceil(len(frames) / max_frames))
    kept = frames[::stride]
    path = out / f"{record['env']}_{record['agent']}.gif"
    write_video(kept, path, fps=FPS / stride)
    return {
        "tool": "record_gifs",
        "run": str(run_dir),
        "preset": _preset(run_dir),
        "env": record["env"],
        "agent": record["agent"],
        "trained_frames": record["frames"],
        "eval_envs": record["eval_envs"],
        "metrics": record["metrics"],
        "episode_steps": [len(e) - 1 for e in episodes],
        "gif": str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path),
        "gif_frames": len(kept),
        "stride": stride,
        "frame_size": list(kept.shape[1:3]),
        "gif_bytes": path.stat().st_size,
        "eval_seed": record["seed"],
        "checkpoint": record["checkpoint"],
        "commit": record["commit"],
        **environment_record("cpu"),
    }


def _preset(run_dir: Path) -> str | None:
    """The experiment preset the run was launched with (its `experiment=` override)."""
    overrides = run_dir / ".hydra" / "overrides.yaml"
    if not overrides.exists():
        return None
    given = [o for o in yaml.safe_load(overrides.read_text()) or [] if o.startswith("experiment=")]
    return given[-1].split("=", 1)[1] if given else None


def gallery(records: list[dict], page: Path) -> str:
    """The gallery block: a table with one GIF per record, linked relative to the page."""
    rows = [
        "| env | agent (preset) | trained frames | greedy evaluation | episode | GIF |",
        "|---|---|---|---|---|---|",
    ]
    for r in records:
        # the top-level metrics (MarineNav's per-stage ones stay in the record), at most 3
        shown = [(k, v) for k, v in r["metrics"].items() if "/" not in k][:3]
        metrics = ", ".join(f"{k} {v:.3g}" for k, v in shown)
        src = Path(os.path.relpath(ROOT / r["gif"], page.resolve().parent)).as_posix()
        preset = f" ({r['preset']})" if r.get("preset") else ""
        rows.append(
            f"| {r['env']} | {r['agent']}{preset} | {r['trained_frames']:,} | {metrics} "
            f"({r['eval_envs']} envs) | {_episodes(r['episode_steps'])}, every {r['stride']} "
            f"shown | ![{r['env']}]({src}) |"
        )
    return "\n".join(rows)


def _episodes(steps: list[int]) -> str:
    if len(steps) == 1:
        return f"{steps[0]} steps"
    lengths = f"{min(steps)}" if min(steps) == max(steps) else f"{min(steps)}-{max(steps)}"
    return f"{len(steps)} episodes of {lengths} steps"


def write_gallery(records: list[dict], page: Path) -> None:
    """Rewrite the page's gallery block from the records."""
    text = page.read_text()
    start, end = GALLERY
    if start not in text or end not in text:
        raise SystemExit(f"{page} has no {start} ... {end} block")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    page.write_text(f"{head}{start}\n{gallery(records, page)}\n{end}{tail}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("runs", nargs="+", type=Path, help="run directories")
    p.add_argument("--episodes", type=int, default=None, help="evaluation envs (the run's)")
    p.add_argument("--max-frames", type=int, default=150, help="a GIF's most frames")
    p.add_argument(
        "--min-frames",
        type=int,
        default=60,
        help="episodes shorter than this play one after another until it is reached",
    )
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "use")
    p.add_argument("--records", type=Path, default=None, help="the JSON-lines file to add to")
    p.add_argument("--page", type=Path, default=None, help="rewrite this page's gallery")
    args = p.parse_args(argv)
    if args.max_frames < 2:
        p.error(f"--max-frames {args.max_frames}: give 2 or more")
    records = []
    for run_dir in args.runs:
        record = gif_of_run(
            run_dir.resolve(), args.out.resolve(), args.episodes, args.max_frames, args.min_frames
        )
        emit(record)
        records.append(record)
    day = records[0]["date"]
    out = args.records or ROOT / "docs" / "bench" / "use" / f"gifs_cpu_{day}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")
    if args.page is not None:  # the newest record of each GIF, in the order first made
        latest = {}
        for line in out.read_text().splitlines():
            record = json.loads(line)
            latest[record["gif"]] = record
        write_gallery(list(latest.values()), args.page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
