"""The replay's draw inside a compiled update (DeviceReplay.draw, OffPolicyAgent.fuse_draw):
the draw reads the ring's extent from device tensors and returns the transitions
sample() returns for the same rows (the same sample, for prioritized replay, from the
same generator state); the trainer fuses it where the update is compiled or captured and
the replay is uniform, and leaves every other case as it was."""

import pytest
import torch

from gpurl.core.progress import Progress
from gpurl.core.replay import ReplaySpec
from gpurl.envs.cartpole import CartPoleEnv
from gpurl.envs.info import env_info
from gpurl.train import build, load_config
from gpurl.trainers.replay import DeviceReplay

from .test_learning_rules import GAMMA, cartpole_batch


def rows_of(s) -> dict:
    """{flat index: (reward, discount, next observation)} of a sample."""
    return {
        int(i): (float(r), float(d), float(o))
        for i, r, d, o in zip(
            s["index"], s["reward"], s["discount"], s["next", "observation"][:, 0], strict=True
        )
    }


def test_draw_returns_the_transitions_sample_returns():
    info = env_info(CartPoleEnv(num_envs=1))
    spec = ReplaySpec(n_step=3, gamma=GAMMA)
    replay = DeviceReplay(spec, info, ["observation"], 100, 4096, "cpu")
    replay.extend(cartpole_batch([1.0, 2.0, 4.0, 8.0], [False, True, False, False], [False] * 4))
    assert int(replay.bounds["count"]) == 4 and int(replay.bounds["newest"]) == 3
    drawn, sampled = rows_of(replay.draw(replay.bounds)), rows_of(replay.sample())
    assert set(drawn) == {0, 1, 2, 3}  # every filled row, none past them
    assert drawn == sampled  # n-step sums cut at the termination, the same bootstrap rows


def test_a_prioritized_draw_returns_the_prioritized_sample():
    info = env_info(CartPoleEnv(num_envs=2))
    spec = ReplaySpec(n_step=2, gamma=GAMMA, prioritized=True)
    replay = DeviceReplay(spec, info, ["observation"], 100, 64, "cpu")
    batch = cartpole_batch([1.0, 2.0, 4.0, 8.0], [False, True, False, False], [False] * 4)
    replay.extend(batch.expand(4, 2).clone())
    replay.update_priorities(torch.tensor([1, 2, 5]), torch.tensor([4.0, 0.5, 9.0]))
    progress = Progress("cpu")
    progress.frames += 1000  # beta moves with the frames
    torch.manual_seed(0)
    drawn = replay.draw(replay.bounds, progress)
    torch.manual_seed(0)
    sampled = replay.sample(progress)
    assert sampled["weight"].unique().numel() > 1  # importance weights, not ones
    for key in sampled.keys(True, True):
        assert torch.equal(drawn[key], sampled[key]), key


def test_draw_keeps_each_run_on_its_own_streams_after_the_ring_wraps():
    info = env_info(CartPoleEnv(num_envs=4))  # 4 streams, 2 a run
    spec = ReplaySpec(n_step=1, gamma=GAMMA)
    replay = DeviceReplay(spec, info, ["observation"], 24, 4000, "cpu", runs=2)  # 6 rows
    for _ in range(3):  # 9 steps written into 6 rows: full, cursor at row 3
        batch = cartpole_batch([1.0, 2.0, 3.0], [False] * 3, [False] * 3)
        replay.extend(batch.expand(3, 4).clone())
    assert int(replay.bounds["count"]) == 6 * 2 and int(replay.bounds["newest"]) == 2
    index = replay.draw(replay.bounds)["index"].view(2, -1)  # run-major rows
    stream = index % 4
    assert (stream[0] < 2).all() and (stream[1] >= 2).all()
    for k in range(2):  # every slot of the run drawn (2,000 draws over 12 slots)
        assert index[k].unique().numel() == 12


def test_a_loaded_replay_keeps_its_tensors_and_bounds():
    info = env_info(CartPoleEnv(num_envs=1))
    spec = ReplaySpec(n_step=1, gamma=GAMMA)
    source = DeviceReplay(spec, info, ["observation"], 100, 16, "cpu")
    source.extend(cartpole_batch([1.0, 2.0, 3.0], [False] * 3, [False] * 3))
    target = DeviceReplay(spec, info, ["observation"], 100, 16, "cpu")
    target.extend(cartpole_batch([5.0], [False], [False]))
    held = dict(target.data)  # what a captured draw would read
    target.load_state_dict(source.state_dict())
    assert all(target.data[k] is v for k, v in held.items())  # loaded in place
    assert torch.equal(target.data["reward"], source.data["reward"])
    assert int(target.bounds["count"]) == 3 and int(target.bounds["newest"]) == 2


def a_trainer(tmp_path, *overrides):
    cfg = load_config(
        [
            *overrides,
            "device=cpu",
            "env.num_envs=8",
            "env.eval_envs=2",
            "agent.hidden=[32,32]",
            "logger=none",
            "trainer.progress=false",
            "trainer.init_random_frames=64",
            "trainer.batch_size=32",
        ]
    )
    return build(cfg, tmp_path)


@pytest.mark.parametrize(
    "overrides, fused",
    [
        (["env=cartpole", "agent=dqn", "compile.update=true"], True),
        (["env=cartpole", "agent=iqn", "compile.update=true"], True),
        (["env=pendulum", "agent=sac", "compile.update=true"], True),
        (["env=pendulum", "agent=acqin", "compile.update=true"], True),
        (["env=cartpole", "agent=dqn"], False),  # eager: the draw stays sample()
        (["env=cartpole", "agent=dqn", "compile.amp=true"], False),
        (["env=cartpole", "agent=dqn", "compile.update=true", "agent.prioritized=true"], True),
        (["env=cartpole", "agent=rainbow", "compile.update=true"], True),
        (["env=pendulum", "agent=td3", "compile.update=true"], False),  # two steps a sample
        (["experiment=dqn_cartpole_masked_lstm"], False),  # sequences
    ],
)
def test_the_trainer_fuses_the_draw_where_the_update_is_compiled(tmp_path, overrides, fused):
    assert a_trainer(tmp_path, *overrides).fused is fused


@pytest.mark.slow
def test_a_compiled_fused_update_matches_the_eager_draw_and_update(tmp_path):
    """compile.update with the draw inside: the weights three updates give are those of
    the eager draw followed by the eager update (Inductor's random draws made the eager
    generator's), and a sample handed to update() still takes the unfused step."""
    eager = a_trainer(tmp_path / "e", "env=cartpole", "agent=dqn")
    fused = a_trainer(tmp_path / "f", "env=cartpole", "agent=dqn", "compile.update=true")
    for tr in (eager, fused):
        torch.manual_seed(0)
        for _ in range(7):  # 56 frames, below init_random_frames: no update yet
            tr.iteration()
    assert int(eager.progress.updates) == 0
    assert torch.equal(eager.buffer.data["reward"], fused.buffer.data["reward"])
    with torch._inductor.config.patch(fallback_random=True):
        torch.manual_seed(1)
        for _ in range(3):
            fused.agent.update(fused.buffer.bounds, fused.progress)
        out = fused.agent.update(fused.buffer.sample(), fused.progress)
    torch.manual_seed(1)
    for _ in range(3):
        eager.agent.update(eager.buffer.draw(eager.buffer.bounds), eager.progress)
    expected = eager.agent.update(eager.buffer.sample(), eager.progress)
    torch.testing.assert_close(out["loss"], expected["loss"], rtol=1e-4, atol=1e-4)
    for name, module in eager.agent.modules().items():
        other = fused.agent.modules()[name].state_dict()
        for k, v in module.state_dict().items():
            torch.testing.assert_close(other[k], v, rtol=1e-4, atol=1e-4, msg=f"{name}.{k}")


@pytest.mark.slow
def test_a_compiled_fused_prioritized_update_writes_the_eager_priorities(tmp_path):
    """Prioritized replay with the draw inside the compiled update: the fused step hands
    back the index it drew, and the priorities written are the eager sample's and
    update's (Inductor's random draws made the eager generator's)."""
    prioritized = ["env=cartpole", "agent=dqn", "agent.prioritized=true"]
    eager = a_trainer(tmp_path / "e", *prioritized)
    fused = a_trainer(tmp_path / "f", *prioritized, "compile.update=true")
    assert fused.fused
    for tr in (eager, fused):
        torch.manual_seed(0)
        for _ in range(7):
            tr.iteration()
    with torch._inductor.config.patch(fallback_random=True):
        torch.manual_seed(1)
        for _ in range(3):
            out = fused.agent.update(fused.buffer.bounds, fused.progress)
            fused.buffer.update_priorities(out.pop("index"), out.pop("priority"))
    torch.manual_seed(1)
    for _ in range(3):
        sample = eager.buffer.sample(eager.progress)
        out = eager.agent.update(sample, eager.progress)
        eager.buffer.update_priorities(sample["index"], out.pop("priority"))
    torch.testing.assert_close(
        fused.buffer.sampler.priority, eager.buffer.sampler.priority, rtol=1e-4, atol=1e-6
    )
    assert (eager.buffer.sampler.priority > 0).sum() > 0


def test_an_agent_with_several_steps_a_sample_refuses_to_fuse(tmp_path):
    from gpurl.errors import ConfigError

    tr = a_trainer(tmp_path, "env=pendulum", "agent=td3", "compile.update=true")
    with pytest.raises(ConfigError, match="several steps") as err:
        tr.agent.fuse_draw(tr.buffer.draw, tr.buffer.bounds)
    assert "\n" not in str(err.value)
