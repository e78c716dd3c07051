"""Configs: unknown keys, wrong types and impossible values fail before any work starts, naming the key.

Tried on every config class (train, eval, generate, recipe, demo) through :func:`tomrl.config.load_config`
(YAML files and ``key=value`` overrides), then through the CLI verbs, where "before any work" is
checked as: exit status 2, one error line naming the key, and no run / output folder created.
"""

from __future__ import annotations

import pytest
from reliability_helpers import REPO_ROOT

from tomrl.cli import main
from tomrl.config import ConfigError, load_config
from tomrl.demo import DemoConfig
from tomrl.evaluation.config import EvalConfig
from tomrl.generators.config import GenerateConfig
from tomrl.models import model_reference_problem
from tomrl.training.config import TrainConfig

SMOKE = str(REPO_ROOT / "configs" / "train" / "smoke_cpu.yaml")

# (config class, overrides, text the error must contain: the key and what is wrong)
BAD = [
    # unknown keys, top level and nested, with a suggestion where one is close
    (TrainConfig, ["lerning_rate=1e-5"], "unknown key 'lerning_rate' for TrainConfig (did you mean 'learning_rate'?)"),
    (TrainConfig, ["eval.evry_steps=3"], "unknown key 'eval.evry_steps'"),
    (TrainConfig, ["lora.rnak=4"], "unknown key 'lora.rnak'"),
    (EvalConfig, ["openai.timeout=3"], "unknown key 'openai.timeout'"),
    (EvalConfig, ["benchmark=[tomi]"], "unknown key 'benchmark' for EvalConfig (did you mean 'benchmarks'?)"),
    (GenerateConfig, ["order=[1]"], "unknown key 'order'"),
    (DemoConfig, ["modle=x"], "unknown key 'modle'"),
    # wrong types
    (TrainConfig, ["max_steps=abc"], "key 'max_steps'"),
    (TrainConfig, ["learning_rate=[1]"], "key 'learning_rate'"),
    (TrainConfig, ["algorithm=ppo"], "key 'algorithm'"),
    (TrainConfig, ["data.train_files=5"], "key 'data.train_files'"),
    (TrainConfig, ["lora={enabled: maybe}"], "key 'lora.enabled'"),
    (EvalConfig, ["limit=ten"], "key 'limit'"),
    (EvalConfig, ["engine=tgi"], "key 'engine'"),
    (GenerateConfig, ["orders=hello"], "key 'orders'"),
    (GenerateConfig, ["seed=1.5"], "key 'seed'"),
    # impossible values
    (TrainConfig, ["prompts_per_step=3", "rollouts_per_prompt=2", "micro_batch_size=4"], "micro_batch_size (4) must divide"),
    (TrainConfig, ["rollouts_per_prompt=1"], "rollouts_per_prompt must be >= 2"),
    (TrainConfig, ["temperature=-0.5"], "temperature must be >= 0"),
    (TrainConfig, ["eval.temperature=-1"], "eval.temperature must be >= 0"),
    (TrainConfig, ["top_p=0"], "top_p must be in (0, 1]"),
    (TrainConfig, ["max_steps=0"], "max_steps must be -1"),
    (TrainConfig, ["reward_weights=[1, 2]"], "reward_weights has 2 weights for 1 rewards"),
    (EvalConfig, ["temperature=-1"], "temperature must be >= 0"),
    (EvalConfig, ["limit=0"], "limit must be >= 1"),
    (EvalConfig, ["openai.timeout_s=0"], "openai.timeout_s must be > 0"),
    (GenerateConfig, ["n=0"], "n must be at least 1"),
    (GenerateConfig, ["orders=[7]"], "orders must be a non-empty list of 0..4"),
    (GenerateConfig, ["split_fractions={train: 0.5, test: 0.6}"], "split_fractions must sum to 1"),
    (GenerateConfig, ["agents=2", "orders=[3]"], "order 3 needs at least that many agents"),
]


@pytest.mark.parametrize("cls, overrides, expected", BAD, ids=[" ".join(o) for _, o, _ in BAD])
def test_bad_override_names_the_key(cls, overrides, expected):
    with pytest.raises(ConfigError) as error:
        load_config(cls, None, overrides)
    assert expected in str(error.value), str(error.value)


@pytest.mark.parametrize("cls, overrides, expected", BAD[:16], ids=[" ".join(o) for _, o, _ in BAD[:16]])
def test_bad_yaml_file_names_the_file_and_key(tmp_path, cls, overrides, expected):
    """The same mistakes written in a YAML file: the error also names the file."""
    lines = []
    for item in overrides:
        key, value = item.split("=", 1)
        *parents, leaf = key.split(".")
        indent = ""
        for parent in parents:
            lines.append(f"{indent}{parent}:")
            indent += "  "
        lines.append(f"{indent}{leaf}: {value}")
    path = tmp_path / "bad.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError) as error:
        load_config(cls, path, [])
    assert str(path) in str(error.value) and expected in str(error.value), str(error.value)


def test_recipe_unknown_key_and_impossible_value(tmp_path):
    from tomrl.loaders.recipes import load_recipe

    path = tmp_path / "r.yaml"
    path.write_text("name: r\npaper: tomrl\ndescription: d\nseed: 0\ncomponents:\n  - name: a\n    loader: hitom\n    split: test\n    cuont: 5\n")
    with pytest.raises(ConfigError, match=r"unknown key 'components\[0\]\.cuont'"):
        load_recipe(path)
    path.write_text("name: r\npaper: tomrl\ndescription: d\nseed: 0\ncomponents:\n  - name: a\n    loader: nope\n    split: test\n")
    with pytest.raises(ConfigError, match="unknown loader 'nope'"):
        load_recipe(path)


def test_invalid_yaml_and_non_mapping(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("model: [unclosed\n")
    with pytest.raises(ConfigError, match=f"{path}: invalid YAML"):
        load_config(TrainConfig, path)
    path.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(TrainConfig, path)
    path.write_bytes(b"model: \xff\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(TrainConfig, path)


# --------------------------------------------------------------------------- model references


@pytest.mark.parametrize(
    "name, problem",
    [
        ("", "empty"),
        ("  ", "empty"),
        ("/no/such/model", "no such folder"),
        ("./runs/nothing/final", "no such folder"),
        ("smollm2-135m", None),
        ("tiny-qwen2", None),
        ("Qwen/Qwen2.5-0.5B-Instruct", None),  # a hub id: cannot be checked offline
    ],
)
def test_model_reference_problem(name, problem):
    found = model_reference_problem(name)
    assert (found is None) if problem is None else (problem in found), found


def test_model_folder_without_config_is_refused(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"x")
    assert "has no config.json" in model_reference_problem(str(tmp_path))
    assert "is a file" in model_reference_problem(str(tmp_path / "weights.bin"))


# --------------------------------------------------------------------------- through the CLI: before any work


def _one_error(err: str) -> str:
    lines = [l for l in err.strip().splitlines() if l.strip()]
    assert len(lines) >= 1 and lines[0].startswith("tomrl: error:") and "Traceback" not in err, err
    return err


TRAIN_BAD = [
    (["lerning_rate=1e-5"], "unknown key 'lerning_rate'"),
    (["prompts_per_step=3", "rollouts_per_prompt=2", "micro_batch_size=4"], "micro_batch_size (4) must divide"),
    (["temperature=-1"], "temperature must be >= 0"),
    (["max_steps=abc"], "key 'max_steps'"),
]


@pytest.mark.parametrize("overrides, expected", TRAIN_BAD, ids=[" ".join(o) for o, _ in TRAIN_BAD])
def test_train_cli_fails_before_creating_the_run(tmp_path, overrides, expected, capsys):
    run_dir = tmp_path / "run"
    assert main(["train", "--config", SMOKE, f"run_dir={run_dir}", *overrides]) == 2
    assert expected in _one_error(capsys.readouterr().err)
    assert not run_dir.exists()


@pytest.mark.parametrize("overrides, expected", [(["top_p=2"], "top_p must be in (0, 1]"), (["openai.retries=2"], "unknown key 'openai.retries'")])
def test_eval_cli_fails_before_creating_the_run(tmp_path, overrides, expected, capsys):
    out = tmp_path / "run"
    assert main(["eval", "--model", "tiny-qwen2", "--benchmark", "tomrl-hitom-order0", "--out", str(out), *overrides]) == 2
    assert expected in _one_error(capsys.readouterr().err)
    assert not out.exists()


def test_generate_cli_fails_before_writing(tmp_path, capsys):
    out = tmp_path / "x.jsonl"
    assert main(["data", "generate", "hitom", "--n", "0", "--out", str(out)]) == 2
    assert "n must be at least 1" in _one_error(capsys.readouterr().err)
    assert not out.exists()


def test_resume_refuses_keys_that_would_change_the_run(tmp_path, capsys):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text("model: tiny-qwen2\n")
    assert main(["train", "--resume", str(run_dir), "learning_rate=1"]) == 2
    assert "override 'learning_rate' cannot change on resume" in _one_error(capsys.readouterr().err)


@pytest.mark.parametrize("model", ["", "/no/such/model"])
def test_train_missing_model_fails_before_any_work(tmp_path, model, capsys):
    run_dir = tmp_path / "run"
    assert main(["train", "--config", SMOKE, f"run_dir={run_dir}", f"model={model}"]) == 2
    assert "key 'model'" in _one_error(capsys.readouterr().err)
    assert not run_dir.exists()


@pytest.mark.parametrize("model", ["", "/no/such/model"])
def test_eval_missing_model_fails_before_any_work(tmp_path, model, capsys):
    out = tmp_path / "run"
    assert main(["eval", "--model", model, "--benchmark", "tomrl-hitom-order0", "--limit", "2", "--out", str(out)]) == 2
    assert "key 'model'" in _one_error(capsys.readouterr().err)
    assert not out.exists()
