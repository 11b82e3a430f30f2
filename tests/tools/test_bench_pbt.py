"""tools/bench_pbt.py: every side starts from trainer.pbt's own first draw, and the space
it hands gpurl on the command line is the task's."""

from gpurl.core.config import plain_keys
from gpurl.train import load_config, make_runs
from tools.bench_pbt import TASKS, draws, space_overrides


def test_the_sides_start_from_the_draw_trainer_pbt_makes():
    for name, task in TASKS.items():
        cfg = load_config(
            [
                *task["overrides"],
                "trainer.num_seeds=4",
                "seed=3",
                "trainer.pbt.enabled=true",
                *space_overrides(task["space"]),
            ]
        )
        space = {k: dict(v) for k, v in plain_keys(cfg.trainer.pbt.space).items() if v}
        assert space == task["space"], name
        assert make_runs(cfg, 1).per_seed == draws(task, 4, 3), name
