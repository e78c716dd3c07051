"""Runs that fail: caught before the run folder exists, or leaving one a corrected command takes over.

A failure after ``tomrl train`` had created its run folder used to leave the user stuck: a traceback,
then the corrected command refused ("already holds a run"), and ``--resume`` refusing to change the
bad key. Now NaN / infinite floats and out-of-range seeds fail in the config layer, broken model
folders fail in :func:`tomrl.models.check_model_reference`, and a run folder whose run stopped
before its first checkpoint is taken over by the next new run. ``tomrl demo`` killed before
training's first checkpoint continues its training run.
"""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import pytest
from reliability_helpers import REPO_ROOT, cli_env, kill, one_error, run_cli, start_cli, wait_until

from tomrl.cli import main
from tomrl.config import ConfigError, load_config
from tomrl.training.config import TrainConfig

SMOKE = str(REPO_ROOT / "configs" / "train" / "smoke_cpu.yaml")
FAST = ["max_steps=1", "eval.every_steps=0", "eval.at_start=false", "save_every=1"]


CONFIG_TRIGGERS = [
    (["learning_rate=nan"], "key 'learning_rate': must be a finite number"),
    (["temperature=nan"], "key 'temperature': must be a finite number"),
    (["kl_coef=.inf"], "key 'kl_coef': must be a finite number"),
    (["eval.temperature=-.inf"], "eval.temperature"),
    (["seed=-1"], "key 'seed': a seed must be between 0 and 4294967295"),
    (["seed=99999999999"], "key 'seed': a seed must be between 0 and 4294967295"),
    (["eval.max_examples=0"], "eval.max_examples must be >= 1 or null"),
]


@pytest.mark.parametrize("overrides, expected", CONFIG_TRIGGERS)
def test_train_non_finite_and_out_of_range_values_fail_before_the_run_folder(tmp_path, overrides, expected, capsys):
    run_dir = tmp_path / "run"
    assert main(["train", "--config", SMOKE, f"run_dir={run_dir}", *overrides]) == 2
    assert expected in one_error(capsys.readouterr().err, alone=False)
    assert not run_dir.exists()


@pytest.mark.parametrize(
    "cls_name, override",
    [("EvalConfig", "temperature=nan"), ("EvalConfig", "openai.timeout_s=nan"), ("EvalConfig", "seed=-5"),
     ("GenerateConfig", "seed=-1"), ("DemoConfig", "seed=99999999999"), ("EvalConfig", "heldout_seed=-1")],
)
def test_every_config_class_shares_the_rules(cls_name, override):
    import importlib

    module = {"EvalConfig": "tomrl.evaluation.config", "GenerateConfig": "tomrl.generators.config", "DemoConfig": "tomrl.demo"}[cls_name]
    cls = getattr(importlib.import_module(module), cls_name)
    with pytest.raises(ConfigError, match=f"key '{override.split('=')[0]}'"):
        load_config(cls, None, [override])


# ----------------------------------------------------------------------------- broken model folders


def broken_model_folders(root: Path, tiny: Path) -> dict[str, tuple[Path, str]]:
    """Model folders that cannot load, each with the text its error must contain."""
    folders = {}

    def copy(name: str) -> Path:
        target = root / name
        shutil.copytree(tiny, target)
        return target

    only_config = root / "only_config"
    only_config.mkdir()
    shutil.copy(tiny / "config.json", only_config / "config.json")
    folders["only config.json"] = (only_config, "has no weights")

    pickled = copy("pickled")
    for weights in pickled.glob("*.safetensors"):
        weights.unlink()
    (pickled / "pytorch_model.bin").write_bytes(b"\x80\x04not really a pickle")
    folders["only a pickle"] = (pickled, "only pickled weights")

    truncated = copy("truncated")
    weights = next(truncated.glob("*.safetensors"))
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    folders["a truncated .safetensors"] = (truncated, "cut short")

    broken = copy("broken_config")
    (broken / "config.json").write_text('{"model_type": "qwen2",')
    folders["a broken config.json"] = (broken, "config.json is not valid JSON")

    remote = copy("remote_code")
    config = json.loads((remote / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "evil.EvilModel"}
    (remote / "config.json").write_text(json.dumps(config))
    (remote / "evil.py").write_text("open(__file__ + '.RAN', 'w').close()\n")
    folders["remote code"] = (remote, "asks to run its own Python code")
    return folders


@pytest.fixture(scope="module")
def broken_models(tmp_path_factory, hermetic_home):
    from tomrl.models import TINY_MODEL

    return broken_model_folders(tmp_path_factory.mktemp("broken_models"), hermetic_home / "models" / TINY_MODEL)


BROKEN = ["only config.json", "only a pickle", "a truncated .safetensors", "a broken config.json", "remote code"]


@pytest.mark.parametrize("which", BROKEN)
def test_train_on_a_broken_model_folder_fails_before_the_run_folder(tmp_path, which, broken_models, capsys):
    folder, expected = broken_models[which]
    run_dir = tmp_path / "run"
    assert main(["train", "--config", SMOKE, f"run_dir={run_dir}", f"model={folder}"]) == 2
    assert expected in one_error(capsys.readouterr().err, alone=False)
    assert not run_dir.exists()


@pytest.mark.parametrize("which", BROKEN)
def test_eval_on_a_broken_model_folder_is_one_error_line(tmp_path, which, broken_models, capsys):
    folder, expected = broken_models[which]
    out = tmp_path / "run"
    assert main(["eval", "--model", str(folder), "--benchmark", "tomrl-hitom-order0", "--limit", "1", "--out", str(out), "heldout_n=2"]) == 2
    assert expected in one_error(capsys.readouterr().err, alone=False)
    assert not out.exists()
    assert not list(folder.glob("*.RAN"))


def test_eval_on_an_unknown_gpu_is_one_error_line(tmp_path, capsys):
    for device, expected in (("gpu9", "device must be cpu, cuda, cuda:N"), ("cuda:9", "cuda:9 asked for")):
        out = tmp_path / device
        assert main(["eval", "--model", "tiny-qwen2", "--benchmark", "tomrl-hitom-order0", "--out", str(out), f"device={device}"]) == 2
        assert expected in one_error(capsys.readouterr().err, alone=False)
        assert not out.exists()


def test_eval_on_a_hub_id_offline_is_one_error_line(tmp_path, hermetic_home):
    env = cli_env(hermetic_home, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))
    result = run_cli(["eval", "--model", "no-such-org/no-such-model", "--benchmark", "tomrl-hitom-order0", "--limit", "1",
                      "--out", str(tmp_path / "run"), "heldout_n=2"], env, tmp_path)
    assert result.returncode == 2
    one_error(result.stderr, alone=False)


# ----------------------------------------------------------------------------- take-over of a failed run


def test_a_folder_whose_run_failed_before_its_first_checkpoint_is_taken_over(tmp_path):
    """What a run that failed after creating its folder leaves: config.yaml, data/, a partial checkpoint."""
    from tomrl.training.run import _set_up_run_dir

    run_dir = tmp_path / "run"
    (run_dir / "data").mkdir(parents=True)
    (run_dir / "config.yaml").write_text("learning_rate: 1.0\n")
    (run_dir / "checkpoints" / "staging.partial").mkdir(parents=True)
    (run_dir / "metrics.jsonl").write_text('{"step": 0}\n')
    (run_dir / "notes.txt").write_text("the user's")
    cfg = load_config(TrainConfig, SMOKE, [f"run_dir={run_dir}"])
    note = _set_up_run_dir(cfg, run_dir, resume=False)
    assert note and "starting a new run in its place" in note
    assert load_config(TrainConfig, run_dir / "config.yaml").learning_rate == cfg.learning_rate
    assert not (run_dir / "checkpoints").exists() and not (run_dir / "metrics.jsonl").exists()
    assert (run_dir / "notes.txt").exists(), "only what a run writes is removed"
    assert (run_dir / "data" / "train.jsonl").exists()


@pytest.mark.parametrize("progress", ["checkpoints/checkpoint-1", "final", "summary.json"])
def test_a_run_that_saved_progress_is_still_refused(tmp_path, progress):
    from tomrl.training.run import _set_up_run_dir

    run_dir = tmp_path / "run"
    (run_dir / "config.yaml").parent.mkdir(parents=True)
    (run_dir / "config.yaml").write_text("{}\n")
    path = run_dir / progress
    path.parent.mkdir(parents=True, exist_ok=True)
    path.mkdir() if not progress.endswith(".json") else path.write_text("{}")
    cfg = load_config(TrainConfig, SMOKE, [f"run_dir={run_dir}"])
    with pytest.raises(ConfigError, match="already holds a run"):
        _set_up_run_dir(cfg, run_dir, resume=False)


@pytest.mark.slow
def test_train_failing_after_its_folder_exists_then_the_corrected_command_runs(tmp_path, hermetic_home):
    env = cli_env(hermetic_home)
    run_dir = tmp_path / "run"
    failed = run_cli(["train", "--config", SMOKE, f"run_dir={run_dir}", "max_prompt_length=5", *FAST], env, tmp_path)
    assert failed.returncode == 2
    assert "every training prompt is longer than max_prompt_length=5" in one_error(failed.stderr, alone=False)
    corrected = run_cli(["train", "--config", SMOKE, f"run_dir={run_dir}", *FAST], env, tmp_path)
    assert corrected.returncode == 0, corrected.stderr[-3000:]
    assert "stopped before its first checkpoint" in corrected.stdout
    assert (run_dir / "final").is_dir()


@pytest.mark.slow
def test_train_on_a_hub_id_offline_leaves_a_folder_the_corrected_command_takes_over(tmp_path, hermetic_home):
    env = cli_env(hermetic_home, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))
    run_dir = tmp_path / "run"
    failed = run_cli(["train", "--config", SMOKE, f"run_dir={run_dir}", "model=no-such-org/no-such-model", *FAST], env, tmp_path)
    assert failed.returncode == 2
    one_error(failed.stderr, alone=False)
    corrected = run_cli(["train", "--config", SMOKE, f"run_dir={run_dir}", *FAST], env, tmp_path)
    assert corrected.returncode == 0, corrected.stderr[-3000:]


DEMO_TRAIN = """
import sys
from pathlib import Path
from rich.console import Console
from tomrl.config import load_config
from tomrl.demo import _train
from tomrl.training.config import TrainConfig
run_dir = sys.argv[1]
cfg = load_config(TrainConfig, sys.argv[2], [f"run_dir={run_dir}", *sys.argv[3:]])
summary = _train(cfg, Path(run_dir), Console())
print("steps", summary.steps)
"""


@pytest.mark.slow
def test_demo_training_killed_before_its_first_checkpoint_continues(tmp_path, hermetic_home):
    env = cli_env(hermetic_home)
    run_dir = tmp_path / "train"
    args = ["train", "--config", SMOKE, f"run_dir={run_dir}", "max_steps=2", "eval.every_steps=0", "eval.at_start=false"]
    process = start_cli(args, env, tmp_path, tmp_path / "killed.log")
    assert wait_until(lambda: (run_dir / "config.yaml").exists(), process, timeout=300)
    kill(process, signal.SIGKILL)
    assert not list((run_dir / "checkpoints").glob("checkpoint-*")), "killed too late: a checkpoint was saved"
    (run_dir / "checkpoints" / "staging.partial").mkdir(parents=True, exist_ok=True)  # what a kill mid-save leaves
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", DEMO_TRAIN, str(run_dir), SMOKE, "max_steps=2", "eval.every_steps=0", "eval.at_start=false"],
                            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "steps 2" in result.stdout
    assert (run_dir / "final").is_dir()


def test_a_resumed_run_does_not_validate_at_its_resume_step():
    """``eval.at_start`` means the run's first step; a resumed run starting at step 2 must not add a
    validation there (the uninterrupted run had none, and it could move best/)."""
    from types import SimpleNamespace

    from tomrl.training.callbacks import Validator
    from tomrl.training.config import EvalDuringTraining

    class Recording(Validator):
        def run(self, step):
            self.validated.append(step)

    validator = Recording("/nonexistent", [object()], ["prompt"], EvalDuringTraining(every_steps=5, at_start=True), "", None, 0)
    validator.validated = []
    validator.on_train_begin(None, SimpleNamespace(global_step=2), None)
    assert validator.validated == []
    validator.on_train_begin(None, SimpleNamespace(global_step=0), None)
    assert validator.validated == [0]
