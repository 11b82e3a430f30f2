"""Population-based training in one process (trainer.pbt, gpurl/trainers/pbt.py): exploit
copies exactly the parent into the child and moves nothing else, explore stays in its
space, truncation selection picks the right runs, a PBT group is deterministic and
resumes exactly, its outputs are written, and a schedule replays."""

import json

import pytest
import torch
import yaml

from gpurl.core.runs import Runs
from gpurl.errors import ConfigError
from gpurl.train import build, load_config, run
from gpurl.trainers.pbt import Population, Range, load_schedule
from tests.test_resume import tensors_equal, train_to

SPACE = [
    "trainer.pbt.enabled=true",
    "trainer.pbt.space.lr={low:1e-4,high:1e-2,log:true}",
    "trainer.pbt.space.gamma={choices:[0.9,0.95,0.99]}",
]
TINY = [
    "agent.hidden=[16,16]",
    "trainer.progress=false",
    "logger=none",
]


def flat(state, prefix=""):
    """{dotted path: tensor} of every tensor in a nested state."""
    out = {}
    if isinstance(state, dict):
        for k, v in state.items():
            out.update(flat(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(state, (list, tuple)):
        for i, v in enumerate(state):
            out.update(flat(v, f"{prefix}.{i}"))
    elif isinstance(state, torch.Tensor):
        out[prefix] = state.detach().clone()
    return out


EXPLOIT_CASES = {
    # off-policy, with the replay copied (trainer.pbt.replay=parent, the default)
    "dqn": (
        ["env=cartpole", "agent=dqn", "trainer.init_random_frames=32", "trainer.batch_size=16"],
        ["q.", "q_target.", "optimizers.optimizer.state", "buffer.data"],
    ),
    # three optimizers stepping apart (per-run learning rates), a temperature per run
    "sac": (
        [
            "env=pendulum",
            "agent=sac",
            "trainer.init_random_frames=32",
            "trainer.batch_size=16",
            "trainer.pbt.space.actor_lr={low:1e-4,high:1e-2,log:true}",
        ],
        ["actor.", "critic_target.", "log_alpha", "alpha_optimizer.state", "buffer.data"],
    ),
    # OU noise: one process per env, copied with its run
    "ddpg_ou": (
        [
            "env=pendulum",
            "agent=ddpg",
            "agent.noise=ou",
            "trainer.init_random_frames=32",
            "trainer.batch_size=16",
            "trainer.pbt.space.critic_lr={low:1e-4,high:1e-2,log:true}",
        ],
        ["actor_target.", "exploration.0.state", "buffer.data"],
    ),
    "ppo": (
        ["env=cartpole", "agent=ppo", "trainer.rollout_steps=8"],
        ["actor.", "critic.", "optimizers.optimizer.state"],
    ),
}


@pytest.mark.parametrize("case", list(EXPLOIT_CASES))
def test_exploit_copies_the_parent_into_the_child_and_moves_nothing_else(tmp_path, case):
    extra, expected = EXPLOIT_CASES[case]
    space = [o for o in SPACE if "space.lr" not in o or case in ("dqn", "ppo")]
    cfg = load_config([*extra, *space, *TINY, "env.num_envs=2", "trainer.num_seeds=4"])
    trainer = build(cfg, tmp_path)
    for _ in range(24):
        trainer.iteration()
    before = flat(trainer.state_dict())
    rng = torch.get_rng_state()
    n, parent, child = 4, 2, 0
    trainer.copy_run(parent, child)
    after = flat(trainer.state_dict())
    assert after.keys() == before.keys()
    changed = []
    for path, old in before.items():
        new = after[path]
        if torch.equal(new, old):
            continue
        changed.append(path)
        if path.startswith("buffer.data"):  # [rows, streams, ...]: a run owns streams
            old, new = old.transpose(0, 1), new.transpose(0, 1)
        rows_old, rows_new = old.reshape(n, -1), new.reshape(n, -1)
        assert torch.equal(rows_new[child], rows_old[parent]), path
        for k in range(n):
            if k != child:
                assert torch.equal(rows_new[k], rows_old[k]), (path, k)
    for part in expected:  # what a run is was copied: networks, optimizer, replay, noise
        assert any(part in path for path in changed), (part, changed)
    # nothing outside the agent and its replay moved: envs, counters, the RNG streams
    assert all(p.startswith(("agent.", "buffer.")) for p in changed), changed
    assert torch.equal(torch.get_rng_state(), rng)


def population(n=8, **pbt):
    cfg = {
        "interval_frames": 100,
        "fraction": 0.25,
        "fitness": 1,
        "perturb": [0.8, 1.2],
        "resample_prob": 0.25,
        "space": {
            "lr": {"low": 1e-4, "high": 1e-2, "log": True},
            "gamma": {"choices": [0.9, 0.95, 0.99]},
            "entropy_coef": {"low": 0.0, "high": 0.05},
        },
        **pbt,
    }
    from gpurl.core.config import plain_keys

    values = {"lr": [1e-3] * n, "gamma": [0.99] * n, "entropy_coef": [0.01] * n}
    runs = Runs(n, 0, values)
    agent_keys = {"lr": 1e-3, "gamma": 0.99, "entropy_coef": 0.01}
    return Population(plain_keys(cfg), runs, agent_keys, seed=0)


def test_truncation_selection_picks_the_bottom_and_top_fractions():
    pop = population(n=8)
    fitness = [5.0, 1.0, 3.0, 9.0, 7.0, 2.0, 8.0, 4.0]
    for _ in range(20):
        pairs = pop.select(fitness)
        assert [child for child, _ in pairs] == [1, 5]  # the two lowest
        assert {parent for _, parent in pairs} <= {3, 6}  # the two highest
    # ties go to the lower run index; at least one pair however small the fraction
    pop = population(n=4, fraction=0.1)
    assert [c for c, _ in pop.select([1.0, 1.0, 1.0, 1.0])] == [3]
    assert {p for _, p in pop.select([1.0, 1.0, 1.0, 1.0])} == {0}
    pop = population(n=8, fraction=0.5)
    pairs = pop.select([float(k) for k in range(8)])
    assert [c for c, _ in pairs] == [0, 1, 2, 3] and {p for _, p in pairs} <= {4, 5, 6, 7}


def test_fitness_is_the_mean_of_the_last_k_evaluations_since_the_last_copy():
    pop = population(n=2, fitness=2)
    logs = [
        [{"frames": f, "return": r} for f, r in ((50, 1.0), (100, 2.0), (150, 4.0))],
        [{"frames": f, "return": r} for f, r in ((50, 10.0), (100, 20.0), (150, 6.0))],
    ]
    assert pop.fitness(logs) == [3.0, 13.0]
    pop.copied_at[1] = 100  # run 1 copied at 100: only its evaluation at 150 counts
    assert pop.fitness(logs) == [3.0, 6.0]
    logs[0][-1]["return"] = float("nan")
    assert pop.fitness(logs)[0] == -float("inf")


@pytest.mark.parametrize("resample_prob", [0.0, 0.25, 1.0])
def test_explore_keeps_every_value_inside_its_space(resample_prob):
    pop = population(resample_prob=resample_prob)
    values = {"lr": 1e-2, "gamma": 0.99, "entropy_coef": 0.0}
    seen = {k: set() for k in values}
    for _ in range(300):
        values = pop.explore(values)
        for key, value in values.items():
            assert pop.space[key].holds(value), (key, value)
            seen[key].add(round(value, 12))
    assert len(seen["gamma"]) == 3 and len(seen["lr"]) > 10  # it moves through the space
    # perturbing alone multiplies by 0.8 or 1.2, clipped; a choice moves to a neighbour
    rng = Range("lr", 1e-4, 1e-2, log=True)
    assert rng.perturb(1e-3, 1.2) == pytest.approx(1.2e-3) and rng.perturb(1e-2, 1.2) == 1e-2
    choice = Range("gamma", choices=(0.9, 0.95, 0.99))
    assert choice.perturb(0.95, 0.8) == 0.9 and choice.perturb(0.99, 1.2) == 0.99


def test_a_step_copies_hyperparameters_and_records_the_lineage():
    pop = population(n=4)
    copies = []
    logs = [[{"frames": 100, "return": r}] for r in (1.0, 5.0, 3.0, 4.0)]
    for k, lr in enumerate((1e-4, 2e-3, 3e-3, 4e-3)):
        pop.runs.set("lr", k, lr)
    pairs = pop.step(100, logs, lambda parent, child: copies.append((parent, child)))
    assert pairs == [(0, 1)] and copies == [(1, 0)]
    child = pop.runs.hyper(0)
    assert child["lr"] in (pytest.approx(2e-3 * 0.8), pytest.approx(2e-3 * 1.2)) or (
        pop.space["lr"].holds(child["lr"])
    )
    assert pop.schedules[0] == [[0, pop.schedules[1][0][1]], [100, child]]
    assert [e["parent"] for e in pop.lineage[-4:]] == [1, None, None, None]
    assert pop.next_frames == 200 and not pop.due(150) and pop.due(200)


PBT_RUN = [
    "env=cartpole",
    "agent=pqn",
    "agent.anneal_lr=false",
    "env.num_envs=4",
    "trainer.rollout_steps=16",
    "trainer.num_seeds=4",
    "trainer.eval_interval=128",
    "trainer.log_interval=128",
    "trainer.checkpoint_interval=256",
    "trainer.pbt.interval_frames=128",
    "trainer.pbt.fraction=0.5",
    "env.eval_envs=2",
    "seed=5",
    *SPACE,
    *TINY,
]


def returns(log):
    return [{k: v for k, v in e.items() if k not in ("wall_s", "eval_s")} for e in log]


@pytest.mark.slow  # three short PBT groups: seconds (CI runs slow tests)
def test_a_pbt_group_is_deterministic_and_resumes_bitwise(tmp_path):
    whole, whole_summary = train_to(PBT_RUN, 512, tmp_path / "whole")
    again, _ = train_to(PBT_RUN, 512, tmp_path / "again")
    assert whole.population.lineage == again.population.lineage
    assert whole.population.copies > 0
    # the checkpoint the whole run wrote at 256 frames (kept as prev.pt), as if it had
    # been stopped there, resumed in a directory of its own
    middle = tmp_path / "whole" / "checkpoints" / "prev.pt"
    assert torch.load(middle, weights_only=True)["frames"] == 256
    second, second_summary = train_to(PBT_RUN, 512, tmp_path / "second", resume=middle)
    assert second.population.lineage == whole.population.lineage
    assert [returns(x) for x in second.run_eval_log] == [returns(x) for x in whole.run_eval_log]
    assert second_summary["pbt"]["schedule"] == whole_summary["pbt"]["schedule"]
    assert second.runs.per_seed == whole.runs.per_seed
    for name, module in whole.agent.modules().items():
        assert tensors_equal(module.state_dict(), second.agent.modules()[name].state_dict()), name


@pytest.mark.slow  # two short groups
def test_a_run_never_copied_trains_exactly_as_without_pbt(tmp_path):
    fixed = [
        "trainer.per_seed.lr=[1e-3,2e-3,3e-3,4e-3]",
        "trainer.per_seed.gamma=[0.99,0.9,0.95,0.99]",
    ]
    plain = [o for o in PBT_RUN if not o.startswith("trainer.pbt")]
    one = ["trainer.pbt.fraction=0.25"]  # one child per step: some runs are never copied
    pbt, _ = train_to([*PBT_RUN, *fixed, *one], 512, tmp_path / "pbt")
    alone, _ = train_to([*plain, *fixed], 512, tmp_path / "plain")
    children = {e["run"] for e in pbt.population.lineage if e["parent"] is not None}
    kept = set(range(4)) - children
    assert children and kept
    for k in kept:
        assert returns(pbt.run_eval_log[k]) == returns(alone.run_eval_log[k]), k


@pytest.mark.slow  # one short PBT group, then a replay of its best run's schedule
def test_pbt_writes_its_lineage_plot_and_best_schedule_and_a_schedule_replays(tmp_path):
    from tools.sweep_summary import load_runs

    cfg = load_config([*PBT_RUN, "trainer.total_frames=512"])
    group = tmp_path / "group"
    summary = json.loads(run(cfg, group).read_text())
    pbt = summary["pbt"]
    lines = [json.loads(x) for x in (group / "pbt_lineage.jsonl").read_text().splitlines()]
    assert [e["frames"] for e in lines[:4]] == [0] * 4 and lines[-1]["frames"] == 512
    assert {e["run"] for e in lines} == {0, 1, 2, 3}
    assert (group / "pbt_hyper.png").stat().st_size > 0
    best = pbt["best_run"]
    assert (
        pbt["schedule"][0][0] == 0 and pbt["schedule"] == summary_of(group, best)["hyper_schedule"]
    )
    # each run keeps the layout of a run of its own, its overrides replaying its schedule
    runs = load_runs(group)
    assert len(runs) == 4
    overrides = yaml.safe_load(
        (group / "seeds" / "seed_5" / ".hydra" / "overrides.yaml").read_text()
    )
    assert not any(o.startswith("trainer.pbt") for o in overrides)
    assert any(o.startswith("trainer.hyper_schedule=") for o in overrides)
    # the best run's schedule, replayed by one run: its values change at the frames given
    schedule = load_schedule(str(group))
    assert schedule == [(f, v) for f, v in pbt["schedule"]]
    replay = [o for o in PBT_RUN if not o.startswith(("trainer.pbt", "trainer.num_seeds"))]
    cfg = load_config([*replay, f"trainer.hyper_schedule={group}", "trainer.total_frames=512"])
    trainer = build(cfg, tmp_path / "replay")
    seen = []
    for _ in range(8):
        trainer.schedule.apply(trainer.frames)
        seen.append((trainer.frames, trainer.runs.hyper(0)))
        trainer.iteration()
    for frames, values in seen:
        expected = [v for f, v in schedule if f <= frames][-1]
        assert values == pytest.approx(expected), frames
    lr = trainer.agent.base_lr
    assert isinstance(lr, torch.Tensor) and float(lr) == pytest.approx(seen[-1][1]["lr"])


def summary_of(group, k):
    seed = json.loads((group / "summary.json").read_text())["seeds"][k]
    return json.loads((group / "seeds" / f"seed_{seed}" / "summary.json").read_text())


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["trainer.num_seeds=1"], "trainer.pbt needs a population"),
        (["trainer.pbt.space.lr=null", "trainer.pbt.space.gamma=null"], "at least one range"),
        (["trainer.pbt.space.lr={low:1e-2,high:1e-4}"], "must be below high"),
        (["trainer.pbt.space.lr={low:0,high:1e-2,log:true}"], "above 0 on a log scale"),
        (["trainer.pbt.space.epsilon_end={low:0.01}"], "needs low and high"),
        (["trainer.pbt.space.epsilon_start={mean:0.5}"], "give {low, high}"),
        (["trainer.pbt.space.actor_lr={low:1e-4,high:1e-2}"], "has no agent.actor_lr"),
        (["trainer.hyper_schedule=/nonexistent"], "choose one"),
    ],
)
def test_pbt_refuses_bad_input_in_one_line(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message.replace("{", r"\{")) as err:
        build(load_config([*PBT_RUN, *overrides]), tmp_path)
    assert "\n" not in str(err.value)


def test_a_schedule_file_that_does_not_fit_is_refused_in_one_line(tmp_path):
    base = [o for o in PBT_RUN if not o.startswith(("trainer.pbt", "trainer.num_seeds"))]
    bad = tmp_path / "bad.json"
    cases = [
        ('[[100, {"lr": 1e-3}], [0, {"lr": 2e-3}]]', "in order"),
        ('{"eval_return": 1}', "holds no schedule"),
        ('[[0, {"tau": 0.1}]]', "has no per-run agent.tau"),
        ("not json", "is not JSON"),
    ]
    for text, message in cases:
        bad.write_text(text)
        with pytest.raises(ConfigError, match=message) as err:
            build(load_config([*base, f"trainer.hyper_schedule={bad}"]), tmp_path / "run")
        assert "\n" not in str(err.value)
