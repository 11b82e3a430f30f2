"""agent.optimizer=rmsprop (gpurl/core/rmsprop.py): the DQN papers' centred RMSprop, for
one run and for N runs stacked in one process (trainer.num_seeds)."""

import tempfile

import pytest
import torch

from gpurl.agents.base import clip_and_step, make_optimizer
from gpurl.core.rmsprop import RMSprop
from gpurl.core.runs import Runs
from gpurl.errors import ConfigError
from gpurl.train import build, load_config


def test_dqn_steps_with_the_papers_rmsprop():
    cfg = load_config(
        [
            "experiment=dqn_cartpole",
            "agent.optimizer=rmsprop",
            "agent.hidden=[32]",
            "trainer.init_random_frames=64",
            "trainer.progress=false",
            "logger=none",
        ]
    )
    with tempfile.TemporaryDirectory() as d:
        trainer = build(cfg, d)
        opt = trainer.agent.optimizer
        assert isinstance(opt, torch.optim.RMSprop)
        group = opt.param_groups[0]
        assert (group["alpha"], group["eps"], group["centered"]) == (0.95, 0.01, True)
        assert group["lr"] == cfg.agent.lr
        before = [p.detach().clone() for p in trainer.agent.q.parameters()]
        while trainer.progress.update_count < 20:
            trainer.iteration()
        state = opt.state[next(trainer.agent.q.parameters())]
        assert {"square_avg", "grad_avg"} <= set(state)  # centred: the gradient's mean too
        moved = [
            not torch.equal(a, p) for a, p in zip(before, trainer.agent.q.parameters(), strict=True)
        ]
        assert all(moved)


def _stacked_and_lone(seed=0):
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(2, 3, 4, generator=gen)  # run k's weight: w[k]
    xs = torch.randn(2, 8, 4, generator=gen)  # run k's batch: xs[k]
    return w, xs


def test_many_runs_each_step_as_its_own_rmsprop():
    """One optimizer over two runs' stacked weights moves each run as that run's own
    RMSprop does on its own loss: the group's loss, a mean over both runs' rows, is
    scaled back to each run's own gradient (eps = 0.01 would feel a halved one)."""
    w, xs = _stacked_and_lone()
    stacked = torch.nn.Parameter(w.clone())
    group = make_optimizer([stacked], 0.01, Runs(2), kind="rmsprop")
    lone = [torch.nn.Parameter(w[k].clone()) for k in range(2)]
    alone = [torch.optim.RMSprop([p], lr=0.01, alpha=0.95, eps=0.01, centered=True) for p in lone]
    for _ in range(5):
        loss = torch.einsum("kbi,kji->kbj", xs, stacked).square().mean()  # over every row
        clip_and_step(group, loss, None)
        for k in range(2):
            alone[k].zero_grad()
            (xs[k] @ lone[k].T).square().mean().backward()
            alone[k].step()
    for k in range(2):
        torch.testing.assert_close(stacked.detach()[k], lone[k].detach(), atol=1e-6, rtol=0)


def test_one_run_clips_its_gradient():
    w, xs = _stacked_and_lone()
    p = torch.nn.Parameter(w[0].clone())
    opt = make_optimizer([p], 0.01, kind="rmsprop")
    assert isinstance(opt, RMSprop)
    ref = torch.nn.Parameter(w[0].clone())
    ref_opt = torch.optim.RMSprop([ref], lr=0.01, alpha=0.95, eps=0.01, centered=True)
    clip_and_step(opt, (xs[0] @ p.T).square().mean() * 100, 0.5)
    (xs[0] @ ref.T).square().mean().mul(100).backward()
    torch.nn.utils.clip_grad_norm_([ref], 0.5)
    ref_opt.step()
    torch.testing.assert_close(p.detach(), ref.detach())


@pytest.mark.parametrize(
    "lr, clip", [(0.01, 10.0), (torch.tensor([0.01, 0.02]), None)], ids=["clip", "per-run-lr"]
)
def test_many_runs_refuse_a_clip_or_a_rate_per_run(lr, clip):
    p = torch.nn.Parameter(torch.zeros(2, 3))
    with pytest.raises(ConfigError, match="agent.optimizer=rmsprop"):
        make_optimizer([p], lr, Runs(2), kind="rmsprop", max_grad_norm=clip)
