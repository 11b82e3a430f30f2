import logging

import pytest
import torch

# One thread: fastest for the small networks here, and robust when cores are shared.
torch.set_num_threads(1)

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@pytest.fixture(autouse=True)
def _root_logger_restored():
    """A run through Hydra in this process (tests that call gpurl.train's main) gives the
    root logger a handler on the stream pytest captured for that test, closed after it:
    a later test whose code logs (JAX probing for backends, say) would find a logging
    error in its own captured stderr. Each test leaves the root logger as it found it."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def scoped_registry():
    """gpurl's component registry (gpurl/core/registry.py) for a test that registers
    components of its own: they, and the Hydra options made for them, are gone after it."""
    from hydra.core.config_store import ConfigStore

    from gpurl.core import registry

    state = registry.snapshot()
    repo = ConfigStore.instance().repo
    saved = {g: dict(repo[g]) for g in ("env", "agent", "logger") if g in repo}
    try:
        yield registry
    finally:
        registry.restore(state)
        for g in ("env", "agent", "logger"):
            repo.pop(g, None)
            if g in saved:
                repo[g] = saved[g]


def devices():
    """CPU always; CUDA too when present."""
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def iterate_without_syncs(trainer, warmup: int, steps: int) -> None:
    """`warmup` training iterations, then `steps` more under
    torch.cuda.set_sync_debug_mode("error"): any device sync in them raises."""
    for _ in range(warmup):
        trainer.iteration()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(steps):
            trainer.iteration()
    finally:
        torch.cuda.set_sync_debug_mode("default")


def assert_iterations_read_nothing(trainer, warmup: int = 4, steps: int = 4) -> None:
    """`warmup` iterations, then `steps` more that must read nothing on the host and run
    utd 1 updates (one per collected frame)."""
    from gpurl.utils.host_reads import count_host_reads

    for _ in range(warmup):
        trainer.iteration()
    before, frames = trainer.progress.update_count, trainer.frames
    with count_host_reads() as reads:
        for _ in range(steps):
            trainer.iteration()
    assert trainer.progress.update_count == before + (trainer.frames - frames)
    assert reads.count == 0, reads.report()


def train_run_dir(run_dir, overrides):
    """Train the config of `overrides` into run_dir laid out as a gpurl run directory
    (.hydra/config.yaml, checkpoints, summary), for the tools that take one. Returns
    (cfg, trainer, summary)."""
    from omegaconf import OmegaConf

    from gpurl.train import build, load_config

    cfg = load_config(list(overrides))
    (run_dir / ".hydra").mkdir()
    OmegaConf.save(cfg, run_dir / ".hydra" / "config.yaml")
    trainer = build(cfg, run_dir)
    return cfg, trainer, trainer.train()


def small_trainer(tmp_path, overrides, device="cpu"):
    """A trainer small enough for hot-path checks: 4 envs, 32-wide networks, 8 frames per
    batch, updates from frame 16 on minibatches of 16."""
    from gpurl.train import build, load_config

    cfg = load_config(
        [
            *overrides,
            f"device={device}",
            "env.num_envs=4",
            *([] if any("marinenav" in o for o in overrides) else ["env.eval_envs=2"]),
            "agent.hidden=[32,32]",
            "trainer.frames_per_batch=8",
            "trainer.init_random_frames=16",
            "trainer.batch_size=16",
            "trainer.buffer_size=1000",
            "logger=none",
            "trainer.progress=false",
        ]
    )
    return build(cfg, tmp_path)


# packing_hrl_cpu shrunk for tests: 4 envs of 6 items at resolution 16, tiny networks
SMALL_PACKING = [
    "experiment=packing_hrl_cpu",
    "env.num_envs=4",
    "env.resolution=16",
    "env.pool_size=8",
    "env.num_objects=6",
    "env.num_candidates=4",
    "env.compile_placement=false",
    "agent.manager.channels=[8]",
    "agent.manager.blocks=[1]",
    "agent.worker.channels=[4,8]",
    "trainer.frames_per_batch=8",
    "trainer.batch_size=8",
    "trainer.utd=0.125",
    "logger=none",
    "trainer.progress=false",
]
