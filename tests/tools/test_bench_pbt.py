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


def test_summarize_pools_populations_and_pairs_sides_on_the_ones_they_share():
    from tools.bench_pbt import summarize

    def record(side, seed, finals, wall):
        return {
            "task": "t",
            "side": side,
            "seed": seed,
            "finals": finals,
            "wall_s": wall,
            "commit": "abc1234",
            "date": f"2026-11-2{seed}",
        }

    records = [
        record("pbt", 0, [0.0, 0.0, 0.0, 0.0], 99.0),  # replaced by the later seed-0 record
        record("pbt", 0, [1.0, 2.0, 3.0, 4.0], 10.0),
        record("pbt", 1, [5.0, 6.0, 7.0, 8.0], 30.0),
        record("ray", 0, [4.0, 4.0, 4.0, 4.0], 40.0),
        record("ray", 1, [8.0, 8.0, 8.0, 8.0], 80.0),
        record("fixed", 2, [1.0, 1.0, 1.0, 1.0], 5.0),  # shares no population with either
    ]
    out = summarize(records, reps=200)
    assert out["commit"] == "abc1234"  # one value where the inputs agree, else the list
    assert out["date"] == ["2026-11-20", "2026-11-21", "2026-11-22"]
    pbt, ray = out["sides"]["pbt"], out["sides"]["ray"]
    assert pbt["populations"] == [0, 1] and pbt["runs"] == 8
    assert pbt["iqm"] == 4.5  # the middle four of 1..8
    assert pbt["mean"] == 4.5 and pbt["at_best"] == 1 and pbt["wall_s"] == 40.0
    assert ray["iqm"] == 6.0 and ray["at_best"] == 4
    assert pbt["iqm_ci"][0] <= pbt["iqm"] <= pbt["iqm_ci"][1]
    pair = out["pairs"]["pbt - ray"]
    assert pair["iqm_difference"] == -1.5
    assert pair["iqm_difference_ci"][0] <= -1.5 <= pair["iqm_difference_ci"][1]
    assert pair["wall_ratio"] == 3.0  # 120 s against 40 s
    assert pair["wall_ratio_per_population"] == {0: 4.0, 1: 2.67}
    assert set(out["pairs"]) == {"pbt - ray"}  # fixed shares no population
