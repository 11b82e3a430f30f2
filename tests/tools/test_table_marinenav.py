"""table_marinenav gathers eval_marinenav records from several files into one table:
on the H100 records it gives the recorded table's rows, and rows from files of
different devices keep their device apart."""

import json
from pathlib import Path

import pytest

from gpurl.errors import ConfigError
from tools import table_marinenav

BENCH = Path(__file__).resolve().parents[2] / "docs" / "bench"
H100 = BENCH / "gpu" / "eval_marinenav_h100_2026-11-23.jsonl"
POLICIES = ["scripted (discrete)", "random (discrete)", "scripted (continuous)"]
POLICIES += ["random (continuous)", "acqin", "ddpg", "dqn", "iqn", "rainbow", "sac"]


def test_reproduces_the_recorded_h100_table(tmp_path, capsys):
    rows = [a for p in POLICIES for a in ("--row", str(H100), p, p)]
    out = tmp_path / "t.md"
    table_marinenav.main([*rows, "--device-name", "cuda=H100", "--out", str(out)])
    lines = out.read_text().splitlines()
    assert capsys.readouterr().out == out.read_text()
    assert lines[0].startswith("| policy | evaluated on | runs | stage | success |")
    assert all(line.split(" | ")[1] == "H100" for line in lines[2:])
    # less the device column, the table eval_marinenav --table wrote on the H100
    recorded = (BENCH / "gpu" / "eval_marinenav_h100_2026-11-23_table.md").read_text().splitlines()
    dropped = [" | ".join(c[:1] + c[2:]) for c in (line.split(" | ") for line in lines[2:])]
    assert dropped == recorded[2:]


def records(policy, device, run, success):
    stages = [*range(6), "all"]
    return [
        {
            "policy": policy,
            "run": run,
            "device": device,
            "stage": s,
            "success_rate": success,
            "travel_time_s": None if success == 0 else 20.0,
            "energy": None if success == 0 else 30000.0,
            "collisions": 2,
            "timeouts": 0,
        }
        for s in stages
    ]


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_rows_from_several_files_keep_their_label_device_and_order(tmp_path, capsys):
    cpu = write(
        tmp_path / "cpu.jsonl", records("a", "cpu", "s0", 0.9) + records("a", "cpu", "s1", 1.0)
    )
    gpu = write(
        tmp_path / "gpu.jsonl", records("b", "cuda", None, 0.0) + records("a", "cuda", "x", 0.5)
    )
    table_marinenav.main(
        ["--row", gpu, "b", "B", "--row", cpu, "a", "A", "--device-name", "cpu=CPU"]
    )
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 + 14
    assert lines[2] == "| B | cuda | 1 | 0 | 0.00 | - | - | 2.0 | 0.0 |"
    assert (
        lines[-1]
        == "| A | CPU | 2 | all | 0.95 ± 0.07 | 20.0 ± 0.0 | 30000 ± 0 | 2.0 ± 0.0 | 0.0 ± 0.0 |"
    )


def test_a_missing_policy_or_stage_is_an_error(tmp_path):
    path = write(tmp_path / "r.jsonl", records("a", "cpu", "s0", 1.0)[:-1])
    with pytest.raises(ConfigError, match="no records of policy 'b'"):
        table_marinenav.main(["--row", path, "b", "B"])
    with pytest.raises(ConfigError, match="has stages"):
        table_marinenav.main(["--row", path, "a", "A"])
