"""A trained run, used: gpurl.api.load as a policy, `python -m gpurl.eval` and
`python -m gpurl.export` (gpurl/trained.py), and the exported program run by torch
alone (examples/run_exported.py)."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from gpurl import api
from gpurl import eval as gpurl_eval
from gpurl import export as gpurl_export
from gpurl.errors import ConfigError
from gpurl.trained import TrainedPolicy, export
from gpurl.trainers.video import video_env

ROOT = Path(__file__).resolve().parents[1]
TINY = [
    "trainer.total_frames=128",
    "trainer.init_random_frames=64",
    "trainer.eval_interval=128",
    "trainer.batch_size=16",
    "agent.hidden=[16,16]",
    "env.eval_envs=2",
    "logger=none",
    "trainer.progress=false",
]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A finished DQN run on CartPole (a tiny budget: what is tested is the plumbing)."""
    from tests.conftest import train_run_dir

    run_dir = tmp_path_factory.mktemp("trained") / "run"
    run_dir.mkdir()
    *_, summary = train_run_dir(run_dir, TINY)
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return run_dir


def test_load_acts_on_tensors_and_mappings_batched_or_not(run):
    policy = api.load(run)
    assert policy.frames == 128
    obs = torch.randn(5, 4)
    batched = policy(obs)
    assert batched.shape == (5,) and batched.dtype == torch.int64
    assert torch.equal(policy(obs), batched)  # greedy: the same actions again
    assert policy(obs[2]).shape == () and policy(obs[2]) == batched[2]
    assert torch.equal(policy({"observation": obs}), batched)
    assert policy(obs.reshape(5, 1, 4)).shape == (5, 1)  # any leading dims
    with pytest.raises(ConfigError, match=r"has shape \(3,\); this policy takes \(4,\)"):
        policy(torch.randn(3))


@pytest.mark.slow  # a run, evaluated or exported: seconds
def test_eval_writes_eval_json_and_prints_a_table(run, capsys):
    assert gpurl_eval.main([str(run), "--episodes", "3", "--seed", "5"]) == 0
    out = capsys.readouterr().out
    record = json.loads((run / "eval.json").read_text())
    assert record["eval_envs"] == 3 and record["seed"] == 5 and record["frames"] == 128
    assert "return" in record["metrics"] and "  return  " in out
    # the run's own seed again: its evaluation envs are built as the run's were, so on
    # the run's one evaluation's checkpoint the episodes and the return are the same
    summary = json.loads((run / "summary.json").read_text())
    again = gpurl_eval.evaluate(run)
    assert again["metrics"]["return"] == pytest.approx(summary["eval_return"])


def test_bad_run_directories_give_one_line(run, tmp_path, capsys):
    cases = {"missing": tmp_path / "nowhere", "no config": tmp_path}
    old = tmp_path / "old"
    (old / ".hydra").mkdir(parents=True)
    cfg = OmegaConf.load(run / ".hydra" / "config.yaml")
    cfg.agent.removed_key = 1  # a key this gpurl does not have
    OmegaConf.save(cfg, old / ".hydra" / "config.yaml")
    cases["another version"] = old
    stacked = tmp_path / "stacked"
    (stacked / ".hydra").mkdir(parents=True)
    cfg = OmegaConf.load(run / ".hydra" / "config.yaml")
    cfg.trainer.num_seeds = 2
    OmegaConf.save(cfg, stacked / ".hydra" / "config.yaml")
    cases["many seeds"] = stacked
    said = {}
    for label, path in cases.items():
        assert gpurl_eval.main([str(path)]) == 2, label
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("gpurl: error: "), (label, err)
        said[label] = err[0]
    assert "is not a directory" in said["missing"] and "no .hydra" in said["no config"]
    assert "from another version" in said["another version"]
    assert "trained 2 seeds in one process" in said["many seeds"]
    assert gpurl_eval.main([str(run), "--checkpoint", "best"]) == 2
    assert "no checkpoints/best.pt" in capsys.readouterr().err
    bad = tmp_path / "corrupt"
    (bad / ".hydra").mkdir(parents=True)
    (bad / ".hydra" / "config.yaml").write_text((run / ".hydra" / "config.yaml").read_text())
    (bad / "checkpoints").mkdir()
    (bad / "checkpoints" / "last.pt").write_bytes(b"not a checkpoint")
    assert gpurl_eval.main([str(bad)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_a_run_saved_before_a_key_existed_loads_with_its_default(run, tmp_path):
    """A run directory of a gpurl that did not have env.observe_velocity yet: the key
    takes today's default (what runs did before it) and the run evaluates as it did."""
    older = tmp_path / "older"
    (older / ".hydra").mkdir(parents=True)
    cfg = OmegaConf.load(run / ".hydra" / "config.yaml")
    del cfg.env["observe_velocity"]
    OmegaConf.save(cfg, older / ".hydra" / "config.yaml")
    (older / "checkpoints").symlink_to(run / "checkpoints")
    policy = TrainedPolicy(older)
    assert policy.cfg.env.observe_velocity is True
    obs = torch.zeros(5, 4)
    assert torch.equal(policy(obs), TrainedPolicy(run)(obs))


@pytest.mark.slow  # a run, evaluated or exported: seconds
def test_export_checks_equal_actions_and_writes_the_program(run, tmp_path):
    meta = export(TrainedPolicy(run), tmp_path / "policy.pt2", observations=1000)
    assert meta["checked_observations"] == 1000
    assert meta["inputs"] == [{"key": "observation", "shape": [4], "dtype": "float32"}]
    program = torch.export.load(tmp_path / "policy.pt2").module()
    obs = torch.randn(7, 4)
    assert torch.equal(program(obs), api.load(run)(obs))


def run_example(script: str, exported: Path, cwd: Path) -> str:
    """examples/SCRIPT on an exported policy in a process of its own (no PYTHONPATH to
    the checkout); its output."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script), str(exported)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.slow  # a run, exported: seconds
def test_a_policy_whose_ops_do_not_export_is_refused_naming_the_op(run, tmp_path, capsys):
    """A network that leaves torch for numpy mid-forward (a forward hook of the user's
    own, say) cannot be traced: one line that names the call, nothing written."""
    policy = TrainedPolicy(run)
    layer = next(m for m in policy.policy.modules() if isinstance(m, torch.nn.Linear))
    layer.register_forward_hook(lambda m, i, o: torch.from_numpy(o.detach().numpy()))
    with pytest.raises(ConfigError, match=r"does not export: \.numpy\(\) is not supported") as err:
        export(policy, tmp_path / "policy.pt2", observations=32)
    assert "\n" not in str(err.value) and not (tmp_path / "policy.pt2").exists()
    assert capsys.readouterr().err.count("\n") <= 1  # the tracer's graph dump is not shown


@pytest.mark.slow  # processes: about 15 s
def test_the_exported_program_runs_without_gpurl(run, tmp_path):
    out = tmp_path / "export" / "policy.pt2"
    assert gpurl_export.main([str(run), "--out", str(out)]) == 0
    assert "gpurl imported: False" in run_example("run_exported.py", out, tmp_path)


@pytest.mark.slow  # a run, evaluated or exported: seconds
def test_eval_records_a_greedy_episode_as_video(run, capsys):
    """The video holds the episode's frames (its start and each state reached) at the
    env's frame size, as MP4 and as GIF."""
    iio = pytest.importorskip("imageio.v3")
    from gpurl.envs.cartpole import CartPoleEnv

    assert gpurl_eval.main([str(run), "--episodes", "2", "--video"]) == 0
    record = json.loads((run / "eval.json").read_text())
    frames = iio.imread(record["video"]["path"])
    assert frames.shape == (record["video"]["frames"], *CartPoleEnv.FRAME, 3)
    assert 2 <= len(frames) <= CartPoleEnv.max_episode_steps + 1
    assert gpurl_eval.main([str(run), "--episodes", "2", "--video", "--gif"]) == 0
    gif = iio.imread(run / "video" / "episode.gif")
    assert gif.shape[0] == json.loads((run / "eval.json").read_text())["video"]["frames"]
    assert gif.shape[1:3] == CartPoleEnv.FRAME


def test_an_env_that_draws_nothing_has_no_video():
    """An env of the user's own without render_frames (the corridor of
    tests/extending/) is refused in one line."""
    from gpurl.trainers.video import record_episode
    from tests.extending.corridor import CorridorEnv

    with pytest.raises(ConfigError, match="env=corridor draws no frames") as err:
        record_episode(CorridorEnv(1), lambda td: td, 10, "corridor")
    assert "\n" not in str(err.value)


def test_marinenav_frames_draw_each_robots_track_since_its_episode_began():
    """Where a robot started is inked in its colour once it has moved off (its track),
    and the track is gone after a reset."""
    from gpurl.envs.marinenav.env import WORLD_SIZE, MarineNavEnv

    env = MarineNavEnv(num_envs=1, stage=0)
    colour = torch.tensor(MarineNavEnv.ROBOT_COLOURS[0], dtype=torch.uint8)
    size = MarineNavEnv.FRAME

    def inked(frames):  # pixels in robot 0's colour: its disc, its goal and its track
        return int((frames[0] == colour).all(-1).sum())

    td = env.reset()
    start = env.env_state.start[0, 0] * size / WORLD_SIZE
    col, row = int(start[0]), int(size - start[1])  # y up on the map, down in the image
    at_start = inked(env.render_frames())
    spec = env.full_action_spec[env.action_key]
    action = torch.full(spec.shape, 24, dtype=torch.int64)  # both thrusts up: ahead
    for _ in range(3):  # about 4 m: still in the picture
        td = env.step(td.set(env.action_key, action))["next"]
        frames = env.render_frames()
    moved = torch.stack([env.env_state.x[0, 0], env.env_state.y[0, 0]]) * size / WORLD_SIZE
    assert (moved - start).norm() > 8  # off its start by more than its disc
    assert torch.equal(frames[0, row, col], colour)  # the track passes its start
    assert inked(frames) > at_start + 8
    env.reset()  # a new episode (its own start): its disc and goal again, no track
    assert abs(inked(env.render_frames()) - at_start) <= 3


def test_native_frames_follow_the_state():
    """CartPole's cart is drawn where x puts it; Pendulum's rod points where theta does."""
    from gpurl.envs.cartpole import CartPoleEnv
    from gpurl.envs.pendulum import PendulumEnv

    env = CartPoleEnv(num_envs=2)
    env.reset()
    state = env.env_state.state.clone()
    state[:, 0] = torch.tensor([-1.0, 1.0])  # left and right of the centre
    state[:, 2] = 0.0
    env.env_state = env.env_state._replace(state=state)
    frames = env.render_frames()
    black = (frames == 0).all(-1)  # the cart (and the track line)
    row = black[:, int(CartPoleEnv.FRAME[0] * 0.7) - 5]  # above the track: the cart only
    cols = [torch.nonzero(r).float().mean().item() for r in row]
    width = CartPoleEnv.FRAME[1]
    assert cols[0] == pytest.approx(width / 2 - width / 4.8, abs=1.5)
    assert cols[1] == pytest.approx(width / 2 + width / 4.8, abs=1.5)
    pend = PendulumEnv(num_envs=1)
    pend.reset()
    pend.env_state = pend.env_state._replace(state=torch.tensor([[0.0, 0.0]]))
    red = (pend.render_frames()[0] == torch.tensor([204, 77, 77], dtype=torch.uint8)).all(-1)
    rows = torch.nonzero(red)[:, 0]
    assert rows.float().mean() < PendulumEnv.FRAME[0] / 2  # upright: above the pivot


@pytest.mark.slow  # a run, evaluated or exported: seconds
def test_save_best_keeps_the_best_evaluations_agent(tmp_path):
    """trainer.save_best: best.pt holds the agent of the evaluation with the highest
    return, which gpurl.eval --checkpoint best evaluates to that return again."""
    from tests.conftest import train_run_dir

    over = [o for o in TINY if not o.startswith(("trainer.eval_interval", "trainer.total"))]
    over += ["trainer.total_frames=512", "trainer.eval_interval=64", "trainer.save_best=true"]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    *_, summary = train_run_dir(run_dir, over)
    history = summary["eval_history"]
    best_frames, best = max(history, key=lambda fr: (fr[1], -fr[0]))  # the first of the best
    assert summary["best_checkpoint"] == str(run_dir / "checkpoints" / "best.pt")
    assert (run_dir / "checkpoints" / "best.pt.sha256").is_file()
    saved = torch.load(run_dir / "checkpoints" / "best.pt", weights_only=False)
    assert (saved["frames"], saved["eval_return"]) == (best_frames, best)
    record = gpurl_eval.evaluate(run_dir, checkpoint="best")
    assert record["checkpoint"] == "best.pt" and record["frames"] == best_frames


def test_pixel_frames_are_the_observation_in_colour():
    from gpurl.envs.pixels import PixelsEnv

    env = PixelsEnv(num_envs=2, stack_k=2, num_worlds=3)
    newest = env.reset()["pixels"][:, -1].long()  # [2, 72, 80] shades 0..3
    frames = env.render_frames()
    assert frames.shape == (2, 144, 160, 3) and frames.dtype == torch.uint8
    palette = torch.tensor(PixelsEnv.PALETTE, dtype=torch.uint8)
    assert torch.equal(frames[:, ::2, ::2], palette[newest])


@pytest.mark.parametrize(
    "name", ["cartpole", "pendulum", "pixels", "packing", "marinenav", "minatar"]
)
def test_every_native_env_family_draws_frames(name):
    """uint8 RGB frames [B, H, W, 3], H and W multiples of 16 (video encoders' blocks),
    not one colour (something is drawn), the same size after steps."""
    from gpurl.envs import make_env
    from tests.envs.test_native_shell import CASES

    cfg, _, _ = CASES[name]
    env = make_env({"name": name, **cfg}, num_envs=2, seed=0)
    td = env.reset()
    first = env.render_frames()
    assert first.dtype == torch.uint8 and first.shape[0] == 2 and first.shape[-1] == 3
    assert first.shape[1] % 16 == 0 and first.shape[2] % 16 == 0
    assert len(torch.unique(first.reshape(-1, 3), dim=0)) > 1
    for _ in range(3):
        td = env.rand_step(td)
        td = td.get("next").exclude("reward", "done", "terminated", "truncated")
    assert env.render_frames().shape == first.shape


@pytest.mark.slow  # a run, evaluated or exported: seconds
def test_video_interval_records_greedy_episodes_while_training(tmp_path):
    iio = pytest.importorskip("imageio.v3")
    from gpurl.envs.cartpole import CartPoleEnv
    from tests.conftest import train_run_dir

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    *_, summary = train_run_dir(run_dir, [*TINY, "trainer.video_interval=64"])
    assert summary["videos"] == [str(run_dir / "videos" / f"frames_{n}.mp4") for n in (64, 128)]
    frames = iio.imread(summary["videos"][-1])
    assert frames.shape[1:] == (*CartPoleEnv.FRAME, 3) and len(frames) >= 2


def test_video_interval_needs_an_env_that_draws(tmp_path):
    from gpurl.train import build, load_config

    corridor = ["env=custom", "env._target_=tests.extending.corridor.CorridorEnv"]
    cfg = load_config([*corridor, *TINY, "trainer.video_interval=128"])
    with pytest.raises(ConfigError, match="trainer.video_interval: env=custom draws no frames"):
        build(cfg, tmp_path)


SMALL = [
    "trainer.total_frames=64",
    "trainer.init_random_frames=32",
    "trainer.batch_size=8",
    "trainer.eval_interval=64",
    "logger=none",
    "trainer.progress=false",
]
# every native family and the foreign ones: (the package it needs, overrides)
FAMILIES = {
    "cartpole": (None, ["env=cartpole", "agent=dqn", "env.eval_envs=2"]),
    "pendulum": (None, ["env=pendulum", "agent=sac", "env.eval_envs=2"]),
    "pixels": (
        None,
        ["experiment=pixels_ppo", "env.num_envs=4", "trainer.rollout_steps=8"]
        + ["agent.minibatches=2", "trainer.total_frames=32", "trainer.eval_interval=32"],
    ),
    "marinenav": (
        None,
        ["env=marinenav", "agent=iqn", "env.num_envs=2", "env.stage=5", "env.pool_size=64"]
        + ["env.pool_refresh=8", "env.max_episode_steps=20"],
    ),
    "packing": (
        None,
        ["experiment=packing_hrl_cpu", "env.resolution=32", "env.num_objects=4"]
        + ["env.pool_size=8", "env.max_steps=4", "env.num_envs=2", "env.eval_envs=2"]
        + ["trainer.total_frames=16", "trainer.init_random_frames=4", "trainer.batch_size=4"]
        + ["trainer.eval_interval=16"],
    ),
    "memory": (
        None,
        ["env=memory", "env.delay=4", "agent=ppo", "env.num_envs=4", "env.eval_envs=2"]
        + ["trainer.rollout_steps=8", "agent.minibatches=2", "trainer.total_frames=32"]
        + ["trainer.eval_interval=32"],
    ),
    "minatar": (
        None,
        ["experiment=minatar_breakout_pqn", "env.num_envs=4", "env.eval_envs=2"]
        + ["trainer.rollout_steps=8", "agent.minibatches=2", "trainer.total_frames=32"]
        + ["trainer.eval_interval=32", "agent.epsilon_frames=32"],
    ),
    "gym": ("gymnasium", ["env=gym", "env.id=Acrobot-v1", "agent=dqn", "env.eval_envs=2"]),
    "dmc": ("dm_control", ["env=dmc", "agent=sac", "env.frame_skip=8", "env.eval_envs=2"]),
    "vmas": (
        "vmas",
        ["experiment=vmas_navigation_dqn", "env.num_envs=2", "env.max_episode_steps=10"]
        + ["env.eval_envs=2"],
    ),
    "envpool": (
        "envpool",
        ["env=envpool", "agent=ppo", "env.num_envs=2", "env.eval_envs=1"]
        + ["trainer.rollout_steps=8", "agent.minibatches=2", "trainer.total_frames=16"]
        + ["trainer.eval_interval=16", "env.max_episode_steps=50"],
    ),
}


def greedy_episode_length(env, policy) -> int:
    """Steps of the greedy episode of env's first copy, from a fresh reset."""
    from torchrl.envs.utils import step_mdp

    from gpurl.trainers.evaluation import greedy_mode

    td = env.reset()
    with greedy_mode():
        for step in range(1, env.max_episode_steps + 1):
            td = env.step(policy(td))
            if bool(td.get(("next", "done")).reshape(-1)[0]):
                return step
            td = step_mdp(td)
    return env.max_episode_steps


@pytest.mark.slow  # a short run per family, its evaluation, video and export: 2-3 minutes
@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_env_family_evaluates_loads_and_exports(family, tmp_path):
    from tests.conftest import train_run_dir

    needs, overrides = FAMILIES[family]
    if needs:
        pytest.importorskip(needs)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    train_run_dir(run_dir, [*SMALL, *overrides])
    policy = TrainedPolicy(run_dir)
    if family == "envpool":  # envpool draws nothing: a video is refused in one line
        with pytest.raises(ConfigError, match="env=envpool draws no frames"):
            gpurl_eval.evaluate(run_dir, video=tmp_path / "episode.gif")
        record = gpurl_eval.evaluate(run_dir)
    else:
        iio = pytest.importorskip("imageio.v3")
        record = gpurl_eval.evaluate(run_dir, video=tmp_path / "episode.mp4")
        # the video: the greedy episode's frames (its start and each state reached), at
        # the size the env draws (an MP4: a GIF merges repeated frames into one)
        env = video_env(dict(policy.cfg.env), "cpu", int(policy.cfg.seed))
        length = greedy_episode_length(env, policy.policy)
        frames = iio.imread(record["video"]["path"])
        assert record["video"]["frames"] == len(frames) == length + 1
        assert frames.shape[1:] == env.render_frames().shape[-3:]
    assert "return" in record["metrics"]
    onnx = importlib.util.find_spec("onnxruntime") is not None  # the export extra
    meta = export(policy, tmp_path / "policy.pt2", observations=64, onnx=onnx)
    assert meta["checked_observations"] == 64 and (meta["onnx"] is not None) == onnx
    entries = [
        torch.zeros(3, *i["shape"], dtype=getattr(torch, i["dtype"])) for i in meta["inputs"]
    ]
    program = torch.export.load(tmp_path / "policy.pt2").module()
    obs = dict(zip(policy.in_keys, entries, strict=True))
    assert torch.equal(program(*entries), policy(obs))  # load and export agree


@pytest.mark.slow  # a run, evaluated or exported: seconds
def test_onnx_export_checks_actions_in_onnxruntime(run, tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    import onnxruntime

    meta = export(TrainedPolicy(run), tmp_path / "policy.pt2", observations=1000, onnx=True)
    assert meta["onnx"] == "policy.onnx"
    session = onnxruntime.InferenceSession(str(tmp_path / "policy.onnx"))
    obs = torch.randn(9, 4)
    (entry,) = session.get_inputs()
    got = session.run(None, {entry.name: obs.numpy()})[0]
    assert torch.equal(torch.from_numpy(got), api.load(run)(obs))


@pytest.mark.slow  # processes
def test_the_onnx_model_runs_without_torch(run, tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    out = tmp_path / "export" / "policy.pt2"
    assert gpurl_export.main([str(run), "--out", str(out), "--onnx"]) == 0
    stdout = run_example("run_exported_onnx.py", out.with_suffix(".onnx"), tmp_path)
    assert "torch imported: False" in stdout


@pytest.mark.slow  # a TensorBoard and a W&B run: seconds each
def test_videos_reach_tensorboard_and_wandb(tmp_path):
    pytest.importorskip("imageio")
    from tests.conftest import train_run_dir

    tb = tmp_path / "tb"
    tb.mkdir()
    train_run_dir(tb, [*TINY, "trainer.video_interval=128", "logger=tensorboard"])
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (events,) = {p.parent for p in (tb / "logs").rglob("events.out.tfevents.*")}
    acc = EventAccumulator(str(events), size_guidance={"images": 0})
    acc.Reload()
    (image,) = acc.Images("eval/video")
    assert image.step == 128 and image.encoded_image_string[:6] == b"GIF89a"

    pytest.importorskip("wandb")
    from gpurl.trainers.loggers import close_loggers
    from tests.test_loggers import wandb_history

    wb = tmp_path / "wb"
    wb.mkdir()
    train_run_dir(wb, [*TINY, "trainer.video_interval=128", "logger=wandb"])
    close_loggers()
    (run_file,) = (wb / "logs" / "wandb").glob("offline-run-*/run-*.wandb")
    rows = [r for r in wandb_history(run_file) if "eval/video/_type" in r]
    assert [(r["eval/step"], r["eval/video/_type"]) for r in rows] == [(128, "video-file")]
    assert list((wb / "logs" / "wandb").rglob("media/videos/eval/*.mp4"))
