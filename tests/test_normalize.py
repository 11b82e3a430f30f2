"""Running observation statistics (agent.encoder.normalize): the merge of batches, the
standardised and clipped features, learning a rollout with the statistics it was acted
on with, every copy of an encoder (actor, critic, target) moved alike, checkpoints and
the one-line refusal. The host-read audit and exact resume hold cases of their own
(tests/test_host_reads_training.py, tests/test_resume.py)."""

import pytest
import torch

from gpurl.errors import ConfigError
from gpurl.policies.networks import RunningNorm
from gpurl.train import build, load_config


def small(tmp_path, *overrides):
    cfg = load_config(
        [
            "env=cartpole",
            "env.num_envs=4",
            "env.eval_envs=2",
            "agent.hidden=[16]",
            "agent.encoder.normalize=true",
            "logger=none",
            "trainer.progress=false",
            *overrides,
        ]
    )
    return build(cfg, tmp_path)


def norms(agent) -> list[RunningNorm]:
    found = {
        id(m): m
        for module in agent.modules().values()
        for m in module.modules()
        if isinstance(m, RunningNorm)
    }
    return list(found.values())


def merged(prior: RunningNorm, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The statistics of the prior's pseudo-rows and x's rows, in float64."""
    x = x.reshape(-1, x.shape[-1]).double()
    n, c = x.shape[0], prior.count.double()
    var, mean = torch.var_mean(x, dim=0, correction=0)
    total = c + n
    delta = mean - prior.mean.double()
    new_mean = prior.mean.double() + delta * n / total
    new_var = (prior.var.double() * c + var * n + delta**2 * c * n / total) / total
    return new_mean, new_var


def test_batches_merge_into_the_statistics_of_all_their_rows():
    gen = torch.Generator().manual_seed(0)
    norm = RunningNorm(3)
    parts = [torch.randn(n, 3, generator=gen) * 5 + 2 for n in (7, 64, 1, 300)]
    for part in parts:
        norm.update(part)
    var, mean = torch.var_mean(torch.cat(parts), dim=0, correction=0)
    torch.testing.assert_close(norm.mean, mean, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(norm.var, var, rtol=1e-4, atol=1e-4)
    assert abs(norm.count.item() - 372) < 1e-3


def test_features_are_standardised_and_clipped():
    norm = RunningNorm(2)
    norm.update(torch.tensor([[0.0, 10.0], [2.0, 30.0]]))  # mean (1, 20), std (1, 10)
    out = norm(torch.tensor([[1.0, 40.0], [1e6, -1e6]]))
    torch.testing.assert_close(out[0], torch.tensor([0.0, 2.0]), rtol=1e-3, atol=1e-3)
    assert out[1].tolist() == [10.0, -10.0]


def recorded_iteration(trainer, found) -> tuple[list, list]:
    """One iteration, recording the statistics at each update and the batch merged."""
    agent = trainer.agent
    seen, observed = [], []
    update, observe = agent.update, agent.observe

    def recording_update(batch, progress):
        seen.append([n.mean.clone() for n in found])
        return update(batch, progress)

    def recording_observe(batch):
        observed.append(batch["observation"].clone())
        observe(batch)

    agent.update, agent.observe = recording_update, recording_observe
    try:
        trainer.iteration()
    finally:
        agent.update, agent.observe = update, observe
    return seen, observed


def test_a_rollout_is_learnt_with_the_statistics_it_was_acted_on_then_merged(tmp_path):
    trainer = small(
        tmp_path, "agent=ppo", "trainer.rollout_steps=8", "agent.minibatches=2", "agent.epochs=2"
    )
    agent = trainer.agent
    found = norms(agent)
    assert len(found) == 2  # the actor's and the critic's encoders
    for _ in range(2):
        before = [(n.mean.clone(), n.var.clone(), n.count.clone()) for n in found]
        seen, observed = recorded_iteration(trainer, found)
        assert len(seen) == 4 and len(observed) == 1  # 2 epochs x 2 minibatches, 1 merge
        for means in seen:
            for mean, (old, _, _) in zip(means, before, strict=True):
                assert torch.equal(mean, old)
        for n, (old_mean, _, old_count) in zip(found, before, strict=True):
            rows = observed[0].reshape(-1, 4)
            assert rows.shape[0] == 32
            assert abs(n.count.item() - old_count.item() - 32) < 1e-3
            assert not torch.equal(n.mean, old_mean)
        prior = RunningNorm(4)
        prior.mean.copy_(before[0][0])
        prior.var.copy_(before[0][1])
        prior.count.copy_(before[0][2])
        mean, var = merged(prior, observed[0])
        for n in found:
            torch.testing.assert_close(n.mean.double(), mean, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(n.var.double(), var, rtol=1e-4, atol=1e-5)


def test_online_and_target_encoders_move_alike_off_policy(tmp_path):
    trainer = small(tmp_path, "agent=dqn", "trainer.batch_size=16", "trainer.init_random_frames=16")
    found = norms(trainer.agent)
    assert len(found) == 2  # online and target Q networks
    for _ in range(6):
        trainer.iteration()
    first = found[0]
    assert first.count.item() > 20  # before and after the random frames
    for n in found[1:]:
        assert torch.equal(n.mean, first.mean) and torch.equal(n.var, first.var)


def test_statistics_are_saved_with_the_modules(tmp_path):
    trainer = small(tmp_path, "agent=pqn", "trainer.rollout_steps=8")
    trainer.iteration()
    state = trainer.agent.state()["modules"]
    saved = [v for m in state.values() for k, v in m.items() if k.endswith("norm.mean")]
    assert saved and torch.equal(saved[0], norms(trainer.agent)[0].mean)


def test_off_by_default_and_refused_with_many_seeds(tmp_path):
    cfg = load_config(["env=cartpole", "agent=pqn", "logger=none", "trainer.progress=false"])
    assert not norms(build(cfg, tmp_path / "plain").agent)
    with pytest.raises(ConfigError, match="drop trainer.num_seeds") as err:
        small(tmp_path / "many", "agent=pqn", "trainer.num_seeds=2")
    assert "\n" not in str(err.value)


@pytest.mark.slow  # a run, loaded and exported: seconds
def test_a_trained_run_loads_and_exports_with_its_statistics(tmp_path):
    """gpurl.api.load and gpurl.export act through the statistics the run ended with."""
    import json

    from gpurl import api
    from gpurl.trained import TrainedPolicy, export
    from tests.conftest import train_run_dir

    run = tmp_path / "run"
    run.mkdir()
    overrides = [
        "env=cartpole",
        "agent=dqn",
        "agent.encoder.normalize=true",
        "agent.hidden=[16]",
        "trainer.total_frames=128",
        "trainer.init_random_frames=64",
        "trainer.eval_interval=128",
        "trainer.batch_size=16",
        "env.eval_envs=2",
        "logger=none",
        "trainer.progress=false",
    ]
    _, trainer, summary = train_run_dir(run, overrides)
    (run / "summary.json").write_text(json.dumps(summary))
    trained = norms(trainer.agent)[0]
    assert trained.count.item() > 100  # moved by the run's batches
    loaded = [m for m in TrainedPolicy(run).policy.modules() if isinstance(m, RunningNorm)]
    assert loaded and all(torch.equal(n.mean, trained.mean) for n in loaded)
    export(TrainedPolicy(run), tmp_path / "policy.pt2", observations=64)
    program = torch.export.load(tmp_path / "policy.pt2").module()
    obs = torch.randn(7, 4) * 3
    assert torch.equal(program(obs), api.load(run)(obs))
