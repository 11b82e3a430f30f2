"""Evaluate a finished (or interrupted) run again: `python -m gpurl.eval RUN_DIR`.

    python -m gpurl.eval runs/2026-11-26/10-00-00_dqn_cartpole_s0
    python -m gpurl.eval RUN_DIR --episodes 100 --seed 7 --checkpoint last
    python -m gpurl.eval RUN_DIR --video            # and RUN_DIR/video/episode.mp4 (--gif)

It rebuilds the run's env and agent from its saved config and checkpoint, then runs the
env's own evaluation protocol greedily, as the run's evaluations did (MarineNav's fixed
scenario set, packing's fixed episodes, held-out pixel worlds; elsewhere one greedy
episode in each of `--episodes` env copies), on evaluation envs of `--seed` (default:
the run's own: its envs are built as the run's were, so the episodes are those of the
run's first evaluation). It prints the metrics as a table and writes them to RUN_DIR/eval.json.
With --video it then records one greedy episode of an evaluation env (one copy, on the
evaluation's seed) as RUN_DIR/video/episode.mp4, or episode.gif with --gif, for envs that
draw frames: the native ones, gym, dmc and vmas.
A mistake (no such run, a damaged checkpoint, a run of another gpurl version) stops
with one line and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from gpurl.envs import make_eval_env
from gpurl.errors import ConfigError
from gpurl.trained import CHECKPOINTS, TrainedPolicy
from gpurl.trainers.evaluation import evaluate_protocol
from gpurl.trainers.video import record_episode, video_env, write_video
from gpurl.utils.provenance import environment_record, gpurl_commit


def evaluate(
    run_dir: str | Path,
    episodes: int | None = None,
    seed: int | None = None,
    checkpoint: str = "last",
    device: str = "cpu",
    video: str | Path | None = None,
) -> dict:
    """The run's evaluation metrics on fresh evaluation envs, as a record (also what
    eval.json holds); with `video` (a .mp4 or .gif path), one greedy episode recorded
    there first."""
    started = time.perf_counter()
    trained = TrainedPolicy(run_dir, checkpoint, device)
    env_cfg = dict(trained.cfg.env)
    if episodes is not None:
        if episodes < 1:
            raise ConfigError(f"--episodes {episodes}: give 1 or more")
        env_cfg["eval_envs"] = int(episodes)
    seed = int(trained.cfg.seed) if seed is None else int(seed)
    env = make_eval_env(env_cfg, device=device, seed=seed)
    metrics = evaluate_protocol(env, trained.policy)
    env.close()
    recorded = None
    if video is not None:
        frames = record_episode(
            video_env(env_cfg, device, seed), trained.policy, env.max_episode_steps, env_cfg["name"]
        )
        recorded = {"path": str(write_video(frames, video)), "frames": len(frames)}
    return {
        "run_dir": str(trained.run_dir),
        "checkpoint": trained.checkpoint.name,
        "frames": trained.frames,
        "env": env_cfg.get("name"),
        "agent": trained.cfg.agent.name,
        "seed": seed,
        "eval_envs": int(env_cfg["eval_envs"]),
        "metrics": metrics,
        "video": recorded,
        "eval_s": round(time.perf_counter() - started, 2),
        "commit": gpurl_commit(),
        **environment_record(device),
    }


def table(record: dict) -> str:
    """The metrics as two columns, the return first."""
    rows = [(k, v) for k, v in record["metrics"].items()]
    width = max(len(k) for k, _ in rows)
    head = (
        f"{record['agent']} on {record['env']}, {record['checkpoint']} at {record['frames']:,} "
        f"frames, evaluation seed {record['seed']}, {record['eval_envs']} envs"
    )
    return "\n".join([head, *(f"  {k:<{width}}  {v:.4g}" for k, v in rows)])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m gpurl.eval",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run_dir", help="a gpurl run directory")
    p.add_argument(
        "--episodes",
        type=int,
        default=None,
        help="evaluation envs (default: the run's env.eval_envs)",
    )
    p.add_argument(
        "--seed", type=int, default=None, help="the run's seed by default (its envs: seed + 10,000)"
    )
    p.add_argument("--checkpoint", default="last", choices=CHECKPOINTS)
    p.add_argument("--device", default="cpu")
    p.add_argument(
        "--video", action="store_true", help="record one greedy episode: RUN_DIR/video/episode.mp4"
    )
    p.add_argument("--gif", action="store_true", help="with --video: a GIF instead of an MP4")
    args = p.parse_args(argv)
    video = None
    if args.video:
        video = Path(args.run_dir) / "video" / ("episode.gif" if args.gif else "episode.mp4")
    try:
        record = evaluate(
            args.run_dir, args.episodes, args.seed, args.checkpoint, args.device, video
        )
    except ConfigError as err:
        print(f"gpurl: error: {err}", file=sys.stderr)
        return 2
    out = Path(args.run_dir) / "eval.json"
    out.write_text(json.dumps(record, indent=2) + "\n")
    print(table(record))
    if record["video"]:
        print(f"video: {record['video']['path']} ({record['video']['frames']} frames)")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
