"""Kill a run after a checkpoint, resume it, and check that it continues from where it was."""

import subprocess
import sys
import time

import torch

from gpurl.train import build, load_config

ARGS = [
    "experiment=sac_pendulum",
    "agent.hidden=[16,16]",
    "trainer.total_frames=1000000",
    "trainer.frames_per_batch=4",
    "env.num_envs=2",
    "env.eval_envs=2",
    "trainer.init_random_frames=40",
    "trainer.batch_size=16",
    "trainer.buffer_size=5000",
    "trainer.checkpoint_interval=200",
    "trainer.eval_interval=1000000",
    "trainer.log_interval=100",
    "trainer.progress=false",
    "logger=none",
]


def wait_for_checkpoint(path, min_frames, proc, timeout=240):
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        if path.is_file():
            state = torch.load(path, weights_only=False)
            if state["frames"] >= min_frames:
                return
        time.sleep(0.5)
    raise TimeoutError("no checkpoint in time")


def tensors_equal(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(tensors_equal(a[k], b[k]) for k in a)
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    return a == b


def test_killed_run_resumes_where_its_checkpoint_left_off(tmp_path):
    run_dir = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpurl.train", *ARGS, f"hydra.run.dir={run_dir}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    ckpt = run_dir / "checkpoints" / "last.pt"
    try:
        wait_for_checkpoint(ckpt, 400, proc)
    finally:
        proc.kill()
        proc.wait()
    saved = torch.load(ckpt, weights_only=False)
    frames = saved["frames"]

    trainer = build(load_config([*ARGS, f"trainer.resume={run_dir}"]), tmp_path / "resumed")
    agent = trainer.agent
    assert trainer.frames == frames
    assert agent.updates == saved["agent"]["updates"] > 0
    for name, module in agent.modules().items():  # networks, target networks, policy counter
        assert tensors_equal(module.state_dict(), saved["agent"]["modules"][name]), name
    assert agent.policy.step.item() == frames
    for name, opt in agent.optimizers().items():
        state = opt.state_dict()["state"]
        assert state and tensors_equal(state, saved["agent"]["optimizers"][name]["state"]), name
    assert len(trainer.buffer) == frames
    stored = saved["buffer"]["_storage"]["_storage"]
    assert torch.equal(trainer.buffer[:frames]["observation"], stored["observation"][:frames])
    assert torch.equal(trainer.buffer[:frames]["action"], stored["action"][:frames])

    trainer.iteration()
    assert trainer.frames == frames + 4
    assert len(trainer.buffer) == frames + 4
    assert agent.updates == saved["agent"]["updates"] + 4
    assert agent.policy.step.item() == frames + 4
    assert torch.equal(trainer.buffer[:frames]["observation"], stored["observation"][:frames])
