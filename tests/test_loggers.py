"""logger=wandb and logger=mlflow keep a run's scalars on this machine, under its run
directory: wandb in offline mode, MLflow in a SQLite store. Each test skips when its
package is absent (both come with the `dev` extra)."""

import importlib.util
import json
import struct
from pathlib import Path

import pytest

from gpurl.errors import ConfigError
from gpurl.train import build, load_config
from gpurl.trainers import loggers
from gpurl.trainers.loggers import close_loggers, make_logger

TINY = [
    "agent.hidden=[16,16]",
    "trainer.total_frames=64",
    "trainer.frames_per_batch=8",
    "trainer.init_random_frames=16",
    "trainer.batch_size=8",
    "trainer.eval_interval=32",
    "trainer.log_interval=16",
    "trainer.checkpoint_interval=64",
    "env.num_envs=2",
    "env.eval_envs=2",
    "trainer.progress=false",
]


def wandb_history(run_file: Path) -> list[dict]:
    """The history rows of an offline run's .wandb file: a LevelDB-style log of 32 KiB
    blocks (7-byte record headers: crc32, length, type) holding protobuf Records."""
    from wandb.proto import wandb_internal_pb2

    data = run_file.read_bytes()
    assert data[:4] == b":W&B"
    block, pos, rows, chunk = 32768, 7, [], b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0:
            break
        chunk += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # FULL, or LAST of a record split over blocks
            record = wandb_internal_pb2.Record()
            record.ParseFromString(chunk)
            chunk = b""
            if record.WhichOneof("record_type") == "history":
                items = record.history.item
                rows.append(
                    {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in items}
                )
    return rows


@pytest.mark.slow  # seconds: an optional backend or a tool end to end (CI runs slow tests)
def test_wandb_writes_an_offline_run_under_the_run_dir(tmp_path):
    pytest.importorskip("wandb")
    cfg = load_config([*TINY, "logger=wandb"])
    assert cfg.logger.mode == "offline"
    summary = build(cfg, tmp_path).train()
    close_loggers()
    (run_file,) = (tmp_path / "logs" / "wandb").glob("offline-run-*/run-*.wandb")
    evals = [
        (r["eval/step"], r["eval/return"]) for r in wandb_history(run_file) if "eval/return" in r
    ]
    assert evals == [(32, summary["eval_history"][0][1]), (64, summary["eval_return"])]


@pytest.mark.slow  # seconds: an optional backend or a tool end to end (CI runs slow tests)
def test_mlflow_writes_a_sqlite_store_under_the_run_dir(tmp_path):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    summary = build(load_config([*TINY, "logger=mlflow"]), tmp_path).train()
    db = tmp_path / "logs" / "mlflow.db"
    assert db.is_file()
    # The next job of a multirun, in the same process and here in the same store
    # (logger.tracking_uri), ends the first MLflow run and starts its own: MLflow allows
    # one active run per process.
    cfg = load_config(["logger=mlflow", f"logger.tracking_uri=sqlite:///{db}"])
    second = make_logger(cfg.logger, tmp_path / "next", "dqn_cartpole_s1")
    second.log_scalar("eval/return", 42.0, step=8)
    close_loggers()

    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    runs = client.search_runs([client.get_experiment_by_name("gpurl").experiment_id])
    logged = {
        r.info.run_name: [
            (m.step, m.value) for m in client.get_metric_history(r.info.run_id, "eval/return")
        ]
        for r in runs
        if r.info.status == "FINISHED"
    }
    assert logged == {
        "dqn_cartpole_s0": [(32, summary["eval_history"][0][1]), (64, summary["eval_return"])],
        "dqn_cartpole_s1": [(8, 42.0)],
    }


@pytest.mark.parametrize("kind, extra", [("wandb", "wandb"), ("mlflow", "mlflow")])
def test_missing_logger_package_is_a_config_error_naming_the_extra(
    tmp_path, monkeypatch, kind, extra
):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        loggers.importlib.util,
        "find_spec",
        lambda name, *args: None if name == kind else real(name, *args),
    )
    with pytest.raises(ConfigError, match=rf"pip install -e '\.\[{extra}\]'"):
        make_logger(load_config([f"logger={kind}"]).logger, tmp_path, "dqn_cartpole_s0")


def test_unknown_mlflow_option_is_a_config_error(tmp_path):
    pytest.importorskip("mlflow")
    with pytest.raises(ConfigError, match="unknown logger=mlflow option"):
        make_logger({"name": "mlflow", "tracking_url": "x"}, tmp_path, "dqn_cartpole_s0")
