"""docs/concepts.md rule 1 for the whole hot path: steady-state training iterations (collect,
extend, sample, update, target update) read nothing back to the host, for every agent.
PPO and A2C are audited in test_on_policy.py; PQN here (rollout, Q(lambda), epochs), the
pixel presets (pixels_ppo, pixels_a2c, pixels_pqn), and IPPO and MAPPO on MarineNav."""

import pytest

from gpurl.train import build, load_config
from gpurl.utils.host_reads import count_host_reads

from .conftest import (
    assert_iterations_read_nothing,
    iterate_without_syncs,
    requires_cuda,
    small_trainer,
)

# a recurrent Q-learner's sequence windows on CartPole
WINDOWS = ["env=cartpole", "agent.sequence_length=4", "agent.burn_in=2", "agent.sequence_overlap=2"]
CASES = {
    "dqn": ["env=cartpole", "agent=dqn"],
    # running observation statistics, moved on once per collected batch
    "sac_normalize": ["env=pendulum", "agent=sac", "agent.encoder.normalize=true"],
    "dqn_dueling_hard_target": [
        "env=cartpole",
        "agent=dqn",
        "agent.dueling=true",
        "agent.target_update=hard",
        "agent.target_update_interval=3",
    ],
    "dqn_prioritized_nstep": [
        "env=cartpole",
        "agent=dqn",
        "agent.prioritized=true",
        "agent.n_step=3",
    ],
    "ddpg": ["env=pendulum", "agent=ddpg"],
    "ddpg_ou": ["env=pendulum", "agent=ddpg", "agent.noise=ou"],
    "td3": ["env=pendulum", "agent=td3"],
    "sac": ["env=pendulum", "agent=sac"],
    "dqn_marinenav": ["env=marinenav", "agent=dqn", "env.max_episode_steps=20"],
    "dqn_marinenav_prioritized_nstep": [
        "env=marinenav",
        "agent=dqn",
        "env.max_episode_steps=20",
        "agent.prioritized=true",
        "agent.n_step=3",
    ],
    "ddpg_marinenav": ["env=marinenav_continuous", "agent=ddpg", "env.max_episode_steps=20"],
    "td3_marinenav": ["env=marinenav_continuous", "agent=td3", "env.max_episode_steps=20"],
    "dqn_pixels": ["env=pixels", "agent=dqn"],
    "iqn": ["env=cartpole", "agent=iqn"],
    "iqn_marinenav": ["env=marinenav", "agent=iqn", "env.max_episode_steps=20"],
    "acqin_marinenav": ["env=marinenav_continuous", "agent=acqin", "env.max_episode_steps=20"],
    "rainbow_marinenav": ["env=marinenav", "agent=rainbow", "env.max_episode_steps=20"],
    "sac_marinenav": ["env=marinenav_continuous", "agent=sac", "env.max_episode_steps=20"],
    # recurrent DQN (R2D2): sequence replay, the hidden state acted, stored and unrolled
    # (windows of 2 burn-in + 4 trained + 2 look-ahead rows: whole after the warm-up)
    "dqn_lstm_prioritized_nstep": [
        "agent=dqn",
        "agent.recurrent=lstm",
        *WINDOWS,
        "agent.n_step=3",
        "agent.prioritized=true",
    ],
    "dqn_gru_hard_target": [
        "agent=dqn",
        "agent.recurrent=gru",
        *WINDOWS,
        "agent.target_update=hard",
        "agent.target_update_interval=3",
    ],
    # recurrent IQN: the same sequence replay under the quantile head
    "iqn_gru_prioritized_nstep": [
        "agent=iqn",
        "agent.recurrent=gru",
        *WINDOWS,
        "agent.n_step=3",
        "agent.prioritized=true",
    ],
    # many seeds in one process (core/runs.py): stacked networks, per-run sampling
    "dqn_3_seeds": ["env=cartpole", "agent=dqn", "trainer.num_seeds=3"],
    "dqn_lstm_2_seeds": ["agent=dqn", "agent.recurrent=lstm", *WINDOWS, "trainer.num_seeds=2"],
    "sac_3_seeds_per_seed_lr": [
        "env=pendulum",
        "agent=sac",
        "trainer.num_seeds=3",
        "trainer.per_seed.actor_lr=[1e-3,3e-4,1e-4]",
    ],
}


@pytest.mark.parametrize("case", CASES)
def test_training_iterations_read_nothing_on_the_host(tmp_path, case):
    # past the random warm-up (4 iterations), 6 iterations of 8 frames and 8 updates each
    assert_iterations_read_nothing(small_trainer(tmp_path, CASES[case]), warmup=4, steps=6)


@requires_cuda
@pytest.mark.parametrize("case", CASES)
def test_training_iterations_never_sync_on_cuda(tmp_path, case):
    iterate_without_syncs(small_trainer(tmp_path, CASES[case], device="cuda"), 4, 6)


ON_POLICY_CASES = {
    "pqn": ["env=cartpole", "agent=pqn"],
    "pqn_3_seeds": ["env=cartpole", "agent=pqn", "trainer.num_seeds=3"],
    "ppo_3_seeds": ["env=cartpole", "agent=ppo", "trainer.num_seeds=3"],
    "pqn_truncation_as_end": ["env=cartpole", "agent=pqn", "agent.bootstrap_truncated=false"],
    # recurrent PPO and A2C: the hidden state written, reset and replayed on the device
    "ppo_lstm": ["env=cartpole", "agent=ppo", "agent.recurrent=lstm"],
    "ppo_gru": ["env=cartpole", "agent=ppo", "agent.recurrent=gru"],
    "a2c_lstm": ["env=cartpole", "agent=a2c", "agent.recurrent=lstm"],
    "pqn_gru": ["env=cartpole", "agent=pqn", "agent.recurrent=gru"],
    # running observation statistics, moved on once per collected batch
    "ppo_normalize": ["env=cartpole", "agent=ppo", "agent.encoder.normalize=true"],
    "ppo_normalize_reward": ["env=cartpole", "agent=ppo", "agent.normalize_reward=true"],
    # the surrogate clip a device scalar, annealed in place beside the lr
    "ppo_anneal_clip": ["env=cartpole", "agent=ppo", "agent.anneal_clip=true"],
    # V(last_obs) from the training state instead of the stored states' batched steps
    "ppo_gru_truncation_as_end": [
        "env=cartpole",
        "agent=ppo",
        "agent.recurrent=gru",
        "agent.bootstrap_truncated=false",
    ],
    "ppo_lstm_pendulum": ["env=pendulum", "agent=ppo", "agent.recurrent=lstm"],
    "ppo_lstm_critic_own": [
        "env=cartpole",
        "agent=ppo",
        "agent.recurrent=lstm",
        "agent.critic_recurrent=true",
    ],
    "pqn_pixels": ["env=pixels", "agent=pqn"],
    # the pixel presets (tile CNN, small worlds, info_mode=stats) as they train
    "pixels_ppo": ["experiment=pixels_ppo"],
    "pixels_a2c": ["experiment=pixels_a2c"],
    "pixels_pqn": ["experiment=pixels_pqn"],
    # multi-robot PPO (per-robot GAE under the running mask): IPPO and MAPPO on MarineNav
    # (VMAS's own step reads the host: tests/test_multi_robot_ppo.py checks PPO adds none)
    "ippo_marinenav": ["env=marinenav", "agent=ppo", "env.max_episode_steps=20"],
    "mappo_marinenav_continuous": [
        "env=marinenav_continuous",
        "agent=ppo",
        "agent.critic=central",
        "env.max_episode_steps=20",
    ],
    # recurrent IPPO: a state per robot, zeroed where a robot stops or its episode ends
    "ippo_marinenav_lstm": [
        "env=marinenav",
        "agent=ppo",
        "agent.recurrent=lstm",
        "env.max_episode_steps=20",
    ],
}
# the fast suite keeps one case (its 2-minute budget); the others differ in the bootstrap
# pass and the encoder, and run with the slow tests
SLOW_ON_POLICY = {
    "pqn_truncation_as_end",
    "pqn_pixels",
    "pixels_a2c",
    "pixels_pqn",
    "mappo_marinenav_continuous",
    "ippo_marinenav_lstm",
}


def small_on_policy_trainer(tmp_path, overrides, device="cpu"):
    """4 envs x 8 steps per rollout, 32-wide networks, 2 epochs of 2 minibatches."""
    cfg = load_config(
        [
            *overrides,
            f"device={device}",
            "env.num_envs=4",
            *([] if any("marinenav" in o for o in overrides) else ["env.eval_envs=2"]),
            "agent.hidden=[32,32]",
            "trainer.rollout_steps=8",
            "agent.epochs=2",
            "agent.minibatches=2",
            "logger=none",
            "trainer.progress=false",
        ]
    )
    return build(cfg, tmp_path)


def on_policy_case(case):
    return pytest.param(case, marks=pytest.mark.slow if case in SLOW_ON_POLICY else ())


@pytest.mark.parametrize("case", [on_policy_case(c) for c in ON_POLICY_CASES])
def test_on_policy_iterations_read_nothing_on_the_host(tmp_path, case):
    trainer = small_on_policy_trainer(tmp_path, ON_POLICY_CASES[case])
    trainer.iteration()  # warm-up: buffers are allocated
    before = trainer.progress.update_count
    with count_host_reads() as reads:
        for _ in range(2):
            trainer.iteration()
    assert trainer.progress.update_count == before + 2 * trainer.epochs * trainer.minibatches
    assert reads.count == 0, reads.report()


@requires_cuda
@pytest.mark.parametrize("case", ON_POLICY_CASES)
def test_on_policy_iterations_never_sync_on_cuda(tmp_path, case):
    trainer = small_on_policy_trainer(tmp_path, ON_POLICY_CASES[case], device="cuda")
    iterate_without_syncs(trainer, warmup=1, steps=3)
