"""``report_to`` takes every transformers reporting integration, and a logger whose package is missing is one
error before the run starts (tomrl train, tomrl demo, tomrl study), not a traceback when the trainer is built."""

from __future__ import annotations

import pytest

from tomrl.cli import main
from tomrl.config import ConfigError, load_config
from tomrl.training.config import REPORT_TO, TrainConfig
from tomrl.training.preflight import available_reporters, preflight

from tests.reliability.reliability_helpers import REPO_ROOT, one_error

SMOKE = str(REPO_ROOT / "configs" / "train" / "smoke_cpu.yaml")


def test_the_list_is_transformers_own():
    from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK

    assert set(REPORT_TO) == set(INTEGRATION_TO_CALLBACK)


def test_every_integration_is_accepted_and_a_typo_is_named():
    assert load_config(TrainConfig, SMOKE, ["report_to=[tensorboard, trackio, mlflow]"]).report_to == ["tensorboard", "trackio", "mlflow"]
    with pytest.raises(ConfigError, match="unknown report_to 'wandbb'; known: azure_ml"):
        load_config(TrainConfig, SMOKE, ["report_to=[wandbb]"])


def _missing() -> str:
    missing = [name for name in REPORT_TO if name != "tensorboard" and name not in available_reporters()]
    if not missing:
        pytest.skip("every reporting integration is installed here")
    return "wandb" if "wandb" in missing else missing[0]


def test_a_missing_logger_package_is_one_error_before_any_work(tmp_path, capsys):
    name = _missing()
    with pytest.raises(ConfigError, match=f"key 'report_to': {name} asked for, but its package is not installed"):
        preflight(load_config(TrainConfig, SMOKE, [f"report_to=[{name}]"]))
    run_dir = tmp_path / "run"
    assert main(["train", "--config", SMOKE, f"run_dir={run_dir}", f"report_to=[{name}]"]) == 2
    assert "pip install" in one_error(capsys.readouterr().err) and not run_dir.exists()
    out = tmp_path / "demo"
    assert main(["demo", "--config", str(REPO_ROOT / "configs" / "demo" / "quick.yaml"), f"out_dir={out}",
                 f"train_overrides=['report_to=[{name}]']"]) == 2
    assert f"{name} asked for" in one_error(capsys.readouterr().err) and not out.exists()
