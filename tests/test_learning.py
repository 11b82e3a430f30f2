"""Learning checks (marked slow: minutes each on 2 CPU cores; CI runs them too).

Each trains an experiment preset with its defaults for seed 0 and asserts the greedy
evaluation return that docs/results.md reports for seeds 0, 1 and 2.

The Pendulum presets run 20k frames there; here SAC and DDPG stop at 10k and must
already be at -200 (a stricter budget, which keeps CI under 45 minutes): every recorded
run of SAC, TD3 and DDPG, seeds 0-2, evaluates at -128 to -159 at 10k frames
(docs/bench/agents/pendulum/*_pendulum_s*_summary.json), and none of them has a
schedule tied to total_frames, so a 10k-frame run is the first half of the 20k one.
TD3 runs its preset's 20k: its evaluations swing by more than 100 from one to the next
(seed 0 at commit c7f2bdd: -163.1 at 8k, -292.2 at 10k, -112.8 at 14k, -287.8 at 18k,
-122.0 at 20k), so one evaluation at 10k says little about where it ends.
PPO on CartPole must reach 400, not the 475 its recorded seeds 0-2 end above: a run
parts from another by one float rounding, and CPUs round differently, so seed 0 is
another draw on another machine. On an AMD EPYC machine (AVX-512) it evaluates at 500,
498.4, 365.7, 392.9, 403.1 and 443.9 over its last 50k frames, where the records' CPU
ended it at 500; 400 is far above a random policy's 22 and still asks for balance.
"""

import pytest

from gpurl.train import build, load_config

# preset -> the final greedy return it must reach
PRESETS = {
    "ppo_cartpole": 400.0,
    "ppo_pendulum": -250.0,
    "pqn_cartpole": 475.0,
    "dqn_cartpole": 475.0,
    "sac_pendulum": -200.0,
    "td3_pendulum": -200.0,
    "ddpg_pendulum": -200.0,
}
SHORTER = {"sac_pendulum": 10_000, "ddpg_pendulum": 10_000}


@pytest.mark.slow
@pytest.mark.parametrize("experiment", PRESETS)
def test_preset_reaches_its_return(tmp_path, experiment):
    overrides = [f"experiment={experiment}", "seed=0", "logger=none", "trainer.progress=false"]
    if experiment in SHORTER:
        overrides.append(f"trainer.total_frames={SHORTER[experiment]}")
    cfg = load_config(overrides)
    summary = build(cfg, tmp_path).train()
    assert summary["frames"] == cfg.trainer.total_frames
    # the final evaluation, not the best one: a run is judged by where it ends
    assert summary["eval_return"] >= PRESETS[experiment], summary["eval_history"]
