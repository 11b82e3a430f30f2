"""CartPole without its velocities (env.observe_velocity=false): the same episodes as
the full CartPole, observing x and theta only, on every face (lean, TorchRL, compiled)."""

import pytest
import torch

from gpurl.envs.cartpole import POSITIONS, CartPoleEnv
from gpurl.errors import ConfigError
from gpurl.train import build, load_config


def test_it_observes_position_and_angle_of_the_same_episodes():
    full, masked = CartPoleEnv(8, seed=1), CartPoleEnv(8, seed=1, observe_velocity=False)
    assert masked.observation_spec["observation"].shape == (8, 2)
    obs_full, obs_masked = full.lean_reset(), masked.lean_reset()
    assert torch.equal(obs_full["observation"][:, POSITIONS], obs_masked["observation"])
    gen = torch.Generator().manual_seed(0)
    ended = 0
    for _ in range(120):
        action = torch.randint(0, 2, (8,), generator=gen)
        (nf, of), (nm, om) = full.lean_step(action), masked.lean_step(action)
        assert torch.equal(nf["observation"][:, POSITIONS], nm["observation"])
        assert torch.equal(of["observation"][:, POSITIONS], om["observation"])
        assert torch.equal(nf["done"], nm["done"])
        ended += int(nm["done"].sum())
    assert ended > 8  # through resets
    td = masked.rand_step(masked.reset())  # the TorchRL face: the same two entries
    assert td["next", "observation"].shape == (8, 2)


@pytest.mark.slow  # Inductor compiles the step: seconds
def test_the_compiled_step_observes_the_same():
    from gpurl.envs.compile import compile_lean_step

    eager, compiled = (CartPoleEnv(4, seed=2, observe_velocity=False) for _ in range(2))
    eager.lean_reset(), compiled.lean_reset()
    step = compile_lean_step(compiled)
    for _ in range(30):
        action = torch.ones(4, dtype=torch.int64)
        (ne, oe), (nc, oc) = eager.lean_step(action), step(action)
        assert nc["observation"].shape == (4, 2)
        torch.testing.assert_close(nc["observation"], ne["observation"])
        torch.testing.assert_close(oc["observation"], oe["observation"])


@pytest.mark.slow  # a short run: seconds
def test_the_key_trains_and_a_wrong_value_is_one_line(tmp_path):
    cfg = load_config(
        ["env=cartpole", "env.observe_velocity=false", "agent=dqn", "trainer.total_frames=64"]
        + ["trainer.init_random_frames=32", "trainer.batch_size=8", "agent.hidden=[8]"]
        + ["trainer.eval_interval=64", "env.eval_envs=2", "logger=none", "trainer.progress=false"]
    )
    assert build(cfg, tmp_path).train()["frames"] == 64
    with pytest.raises(ConfigError, match="env.observe_velocity") as err:
        build(load_config(["env=cartpole", "env.observe_velocity=sometimes"]), tmp_path / "bad")
    assert "\n" not in str(err.value)
