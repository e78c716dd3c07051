"""veRL export: parquet schema, the launch script, and the compute_score adapter veRL loads by path."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tomrl.config import ConfigError, load_config
from tomrl.schema import read_examples
from tomrl.training.config import TrainConfig
from tomrl.training.verl_export import export_verl, launch_command

REPO = Path(__file__).resolve().parents[2]
ADAPTER = REPO / "src" / "tomrl" / "training" / "verl_reward.py"
# veRL's PPO trainer config keys (scripts/verl_config_keys.py; the veRL release is in the header).
VERL_KEYS = REPO / "tests" / "data" / "verl_ppo_trainer_keys.txt"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("verl")
    cfg = load_config(TrainConfig, REPO / "configs/train/smoke_cpu.yaml", [f"run_dir={out / 'run'}"])
    export_verl(cfg, out)
    return out


def test_parquet_schema(exported):
    table = pq.read_table(exported / "train.parquet")
    assert table.column_names == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    rows = table.to_pylist()
    examples = read_examples(exported / "data" / "train.jsonl")
    assert len(rows) == len(examples) == 16
    for index, (row, example) in enumerate(zip(rows, examples)):
        assert row["data_source"] == example.source
        assert row["ability"] == "theory_of_mind"
        assert row["reward_model"] == {"style": "rule", "ground_truth": example.answer}
        assert [m["role"] for m in row["prompt"]] == ["system", "user"]
        assert example.story in row["prompt"][1]["content"] and example.question in row["prompt"][1]["content"]
        info = row["extra_info"]
        assert info["index"] == index and info["split"] == "train" and info["id"] == example.id
        assert info["order"] == example.order and info["reward"] == "paper" and info["prefill"] == ""
    validation = pq.read_table(exported / "validation.parquet").to_pylist()
    assert len(validation) == 4 and {r["extra_info"]["split"] for r in validation} == {"validation"}
    train_stories = {r["extra_info"]["story"] for r in rows}
    assert not train_stories & {r["extra_info"]["story"] for r in validation}


def test_launch_script(exported):
    script = (exported / "run_verl.sh").read_text()
    assert "python3 -m verl.trainer.main_ppo" in script
    assert "reward.custom_reward_function.path=pkg://tomrl.training.verl_reward" in script
    assert "reward.custom_reward_function.name=compute_score" in script
    assert '"data.train_files=$HERE/train.parquet"' in script and '"data.val_files=$HERE/validation.parquet"' in script
    assert "algorithm.adv_estimator=grpo" in script and "actor_rollout_ref.rollout.n=2" in script
    # No argument points back at this machine (but the tiny test model's local folder: hub ids are names).
    arguments = [a for a in verl_arguments(script) if not a.startswith("actor_rollout_ref.model.path=")]
    assert not [a for a in arguments if str(exported.resolve()) in a or str(REPO) in a or "=/" in a]
    assert subprocess.run(["bash", "-n", str(exported / "run_verl.sh")]).returncode == 0


def verl_arguments(script: str) -> list[str]:
    """The words run_verl.sh passes to veRL's main_ppo (with $HERE and the like unexpanded)."""
    command = script.split("python3 -m verl.trainer.main_ppo", 1)[1]
    words = shlex.split(command.replace("\\\n", " "))
    assert words[-1] == "$@"
    return words[:-1]


@pytest.fixture
def fake_verl(tmp_path):
    """A ``python3`` on PATH that writes the arguments it gets, one a line, to $ARGS_FILE: veRL stand-in."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "python3"
    fake.write_text('#!/bin/bash\nprintf "%s\\n" "$@" > "$ARGS_FILE"\n')
    fake.chmod(0o755)
    return bin_dir


def run_script(script: Path, fake_verl: Path, cwd: Path, **env: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    args_file = cwd / "args.txt"
    args_file.unlink(missing_ok=True)
    environment = {**os.environ, "PATH": f"{fake_verl}{os.pathsep}{os.environ['PATH']}", "ARGS_FILE": str(args_file), **env}
    environment = {k: v for k, v in environment.items() if k not in ("N_GPUS", "ROLLOUT_TP", "OFFLOAD") or k in env}
    done = subprocess.run(["bash", str(script), "trainer.save_freq=7"], cwd=cwd, env=environment, capture_output=True, text=True)
    return done, args_file.read_text().splitlines() if args_file.exists() else []


def test_export_folder_runs_after_being_moved(exported, fake_verl, tmp_path):
    moved = tmp_path / "copied to the gpu machine"
    shutil.copytree(exported, moved)
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    done, args = run_script(moved / "run_verl.sh", fake_verl, elsewhere, N_GPUS="1")
    assert done.returncode == 0, done.stderr
    assert args[:2] == ["-m", "verl.trainer.main_ppo"]
    settings = dict(a.split("=", 1) for a in args[2:])
    assert settings["data.train_files"] == str(moved / "train.parquet") and (moved / "train.parquet").exists()
    assert settings["data.val_files"] == str(moved / "validation.parquet") and (moved / "validation.parquet").exists()
    assert settings["trainer.n_gpus_per_node"] == "1"
    assert settings["actor_rollout_ref.rollout.tensor_model_parallel_size"] == "1"
    assert settings["actor_rollout_ref.actor.fsdp_config.param_offload"] == "True"
    assert args[-1] == "trainer.save_freq=7"  # extra arguments reach veRL last, so they win


def test_launch_environment_overrides(exported, fake_verl, tmp_path):
    done, args = run_script(exported / "run_verl.sh", fake_verl, tmp_path, N_GPUS="2", ROLLOUT_TP="2", OFFLOAD="False")
    assert done.returncode == 0, done.stderr
    for setting in ("trainer.n_gpus_per_node=2", "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
                    "actor_rollout_ref.actor.fsdp_config.param_offload=False",
                    "actor_rollout_ref.actor.fsdp_config.optimizer_offload=False",
                    "actor_rollout_ref.ref.fsdp_config.param_offload=False"):
        assert setting in args, setting
    # A tensor-parallel size that does not divide the GPU count stops before veRL starts.
    done, args = run_script(exported / "run_verl.sh", fake_verl, tmp_path, N_GPUS="1", ROLLOUT_TP="2")
    assert done.returncode == 2 and "ROLLOUT_TP=2 does not divide N_GPUS=1" in done.stderr and not args


def test_paper_a_launch_settings():
    cfg = load_config(TrainConfig, REPO / "configs/train/paper_a_qwen2.5-0.5b.yaml")
    script = launch_command(cfg, gpus=4, has_validation=True)
    for setting in ("algorithm.adv_estimator=grpo", "data.train_batch_size=8", "actor_rollout_ref.rollout.n=16",
                    "actor_rollout_ref.actor.optim.lr=5e-07", "actor_rollout_ref.actor.kl_loss_coef=0.001",
                    "actor_rollout_ref.actor.kl_loss_type=low_var_kl", "actor_rollout_ref.actor.entropy_coeff=0.001",
                    "actor_rollout_ref.actor.clip_ratio=0.2", "data.max_prompt_length=1024",
                    "data.max_response_length=2048", "actor_rollout_ref.rollout.temperature=1.0",
                    "trainer.total_epochs=2", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
                    "trainer.test_freq=10", "trainer.val_before_train=True", "trainer.save_freq=50",
                    "actor_rollout_ref.rollout.val_kwargs.temperature=0.0", "actor_rollout_ref.rollout.val_kwargs.do_sample=False"):
        assert setting in verl_arguments(script), setting
    cfg_b = load_config(TrainConfig, REPO / "configs/train/paper_b_qwen2.5-7b.yaml")
    script_b = launch_command(cfg_b, gpus=4, has_validation=True)
    for setting in ("algorithm.adv_estimator=reinforce_plus_plus", "algorithm.use_kl_in_reward=True",
                    "actor_rollout_ref.rollout.n=8", "actor_rollout_ref.rollout.temperature=0.6", "trainer.total_epochs=10"):
        assert setting in verl_arguments(script_b), setting


def test_paper_a_7b_tensor_parallel_and_offload():
    # Paper A's tom_grpo.sh (bigai-ai/ToM-RL): rollout.tensor_model_parallel_size=1, actor param/grad/optimizer
    # offload and ref param offload, for every model it trained; veRL's own default TP (2) fails on one GPU.
    cfg = load_config(TrainConfig, REPO / "configs/train/paper_a_qwen2.5-7b.yaml")
    script = launch_command(cfg, gpus=4, has_validation=True)
    arguments = verl_arguments(script)
    for setting in ("actor_rollout_ref.rollout.tensor_model_parallel_size=$ROLLOUT_TP",
                    "actor_rollout_ref.actor.fsdp_config.param_offload=$OFFLOAD",
                    "actor_rollout_ref.actor.fsdp_config.optimizer_offload=$OFFLOAD",
                    "actor_rollout_ref.ref.fsdp_config.param_offload=$OFFLOAD",
                    "trainer.n_gpus_per_node=$N_GPUS"):
        assert setting in arguments, setting
    assert "N_GPUS=${N_GPUS:-4}\n" in script and "ROLLOUT_TP=${ROLLOUT_TP:-1}\n" in script and "OFFLOAD=${OFFLOAD:-True}\n" in script
    assert "N_GPUS=${N_GPUS:-1}\n" in launch_command(cfg, gpus=1, has_validation=True)
    with pytest.raises(ConfigError):
        launch_command(cfg, gpus=0, has_validation=True)


@pytest.mark.parametrize(("overrides", "has_validation", "test_freq", "before_train"), [
    (["eval.every_steps=10"], True, "10", "True"),
    (["eval.every_steps=10", "eval.at_start=false"], True, "10", "False"),
    (["eval.every_steps=0"], True, "-1", "False"),  # no validation at all, not even before training
    (["eval.every_steps=10"], False, "-1", "False"),  # no validation set
])
def test_validation_schedule(overrides, has_validation, test_freq, before_train):
    # veRL validates when trainer.test_freq > 0 (every test_freq steps and at the last), and before the
    # first step unless trainer.val_before_train=False (verl/trainer/ppo/ray_trainer.py, veRL 0.9.1).
    cfg = load_config(TrainConfig, REPO / "configs/train/paper_a_qwen2.5-0.5b.yaml", overrides)
    arguments = verl_arguments(launch_command(cfg, gpus=4, has_validation=has_validation))
    assert f"trainer.test_freq={test_freq}" in arguments
    assert f"trainer.val_before_train={before_train}" in arguments


def verl_config_keys() -> set[str]:
    lines = VERL_KEYS.read_text().splitlines()
    assert lines[1].startswith("# veRL 0.9.1: PyPI wheel verl-0.9.1-py3-none-any.whl")
    return {line for line in lines if line and not line.startswith("#")}


def exportable_configs() -> list[Path]:
    configs = sorted((REPO / "configs" / "train").rglob("*.yaml"))
    assert {"paper_a_qwen2.5-7b.yaml", "paper_b_qwen2.5-7b.yaml", "smoke_cpu.yaml"} <= {c.name for c in configs}
    return configs


@pytest.mark.parametrize("config", exportable_configs(), ids=lambda path: path.stem)
def test_every_override_is_a_verl_config_key(config):
    # veRL's Hydra config is struct: an unknown key stops main_ppo before it starts, on the GPU machine.
    keys = verl_config_keys()
    assert "actor_rollout_ref.rollout.tensor_model_parallel_size" in keys and "grad_offload" not in " ".join(keys)
    cfg = load_config(TrainConfig, config, ["max_steps=5", "lora.enabled=true"])
    for has_validation in (True, False):
        arguments = verl_arguments(launch_command(cfg, gpus=4, has_validation=has_validation))
        assert len(arguments) > 40
        unknown = [a for a in arguments if a.split("=", 1)[0] not in keys]
        assert not unknown, f"not in veRL {VERL_KEYS.name}: {unknown}"


def test_reward_adapter_imports_only_pydantic_and_yaml(exported):
    # veRL's environment gets tomrl by `pip install --no-deps`: the adapter, and every reward it scores
    # with, must work with only the standard library, pydantic and PyYAML importable.
    allowed = ["tomrl", "pydantic", "pydantic_core", "annotated_types", "typing_extensions", "typing_inspection", "yaml", "_yaml"]
    program = f"""
import importlib.abc, importlib.machinery, json, sys, sysconfig
INSTALLED = {{sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}}
ALLOWED = {set(allowed)!r}
class OnlyAllowed(importlib.abc.MetaPathFinder):
    # Installed packages other than the allowed ones fail to import; the standard library imports as usual.
    def find_spec(self, name, path=None, target=None):
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        origin = (spec.origin or "") if spec else ""
        if any(origin.startswith(folder) for folder in INSTALLED) and name.split(".")[0] not in ALLOWED:
            raise ImportError(f"the veRL reward adapter imported {{name}} ({{origin}})")
        return None
sys.meta_path.insert(0, OnlyAllowed())
adapter = importlib.import_module("tomrl.training.verl_reward")
row = json.loads(sys.argv[1])
gold = row["reward_model"]["ground_truth"]
for reward in ("paper", "strict", "paper_b", "fidelity"):
    info = {{**row["extra_info"], "reward": reward}}
    response = f"<think>The {{gold}} is where it is.</think><answer>{{gold}}</answer>"
    adapter.compute_score(row["data_source"], response, gold, info)
    adapter.compute_score_details(row["data_source"], response, gold, info)
assert "tomrl.world.parsers" in sys.modules  # the fidelity reward parsed the story
assert not {{"transformers", "torch", "trl", "datasets", "numpy"}} & set(sys.modules), sorted(sys.modules)
"""
    row = pq.read_table(exported / "train.parquet").to_pylist()[0]
    done = subprocess.run([sys.executable, "-c", program, json.dumps(row)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    plain = subprocess.run([sys.executable, "-c", "import tomrl.training.verl_reward, sys; assert 'transformers' not in sys.modules"])
    assert plain.returncode == 0


def test_rendered_prompt_format_matches_tomrl_training_prompts(tmp_path):
    cfg = load_config(TrainConfig, REPO / "configs/train/smoke_cpu.yaml", [f"run_dir={tmp_path / 'run'}"])
    export_verl(cfg, tmp_path, prompt_format="rendered")
    row = pq.read_table(tmp_path / "train.parquet").to_pylist()[0]
    assert len(row["prompt"]) == 1 and row["prompt"][0]["role"] == "user"
    assert row["prompt"][0]["content"].endswith("<|im_start|>assistant\n<think>")
    assert row["extra_info"]["prefill"] == "<think>"


def load_adapter_like_verl():
    # veRL can also import the reward file by path (importlib spec_from_file_location), not as a package module.
    spec = importlib.util.spec_from_file_location("custom_module", ADAPTER)
    module = importlib.util.module_from_spec(spec)
    sys.modules["custom_module"] = module
    spec.loader.exec_module(module)
    return module


def test_compute_score_adapter_uses_tomrl_rewards():
    adapter = load_adapter_like_verl()
    paper = {"reward": "paper", "prefill": "<think>"}
    # Paper A: format +1/-1, answer +2/-2: totals 3, -1, -3
    assert adapter.compute_score("tomrl-hitom", " A saw it.</think><answer>blue_box</answer>", "blue_box", paper) == 3.0
    assert adapter.compute_score("tomrl-hitom", " A saw it.</think><answer>red_box</answer>", "blue_box", paper) == -1.0
    assert adapter.compute_score("tomrl-hitom", "<think>x</think><answer>blue_box</answer>", "blue_box", paper) == -3.0
    # Paper A's suffix match accepts "toolbox" for "box"; the strict reward does not.
    assert adapter.compute_score("hi_tom", "x</think><answer>toolbox</answer>", "box", paper) == 3.0
    assert adapter.compute_score("hi_tom", "x</think><answer>toolbox</answer>", "box", {"reward": "strict", "prefill": "<think>"}) == -1.0
    # Without a prefill (upstream veRL, messages format) the model writes its own <think>.
    assert adapter.compute_score("hi_tom", "<think>x</think><answer>box</answer>", "box", {"reward": "paper", "prefill": ""}) == 3.0
    # Paper B: 0.1 format + 1.0 correct.
    assert adapter.compute_score("hi_tom", "<think>x</think><answer>box</answer>", "box", {"reward": "paper_b", "prefill": ""}) == pytest.approx(1.1)
    details = adapter.compute_score_details("hi_tom", "<think>x</think><answer>bag</answer>", "box", {"reward": "paper", "prefill": ""})
    assert details == {"score": -1.0, "format_ok": 1.0, "correct": 0.0, "component_format": 1.0, "component_answer": -2.0}
    # Default reward and prefill when extra_info is missing: Paper A's reward, no prefill.
    assert adapter.compute_score("hi_tom", "<think>x</think><answer>box</answer>", "box") == 3.0


def test_adapter_scores_exported_rows_like_training(exported):
    from tomrl.rewards.functions import score_one

    adapter = load_adapter_like_verl()
    for row in pq.read_table(exported / "train.parquet").to_pylist()[:4]:
        gold = row["reward_model"]["ground_truth"]
        response = f"<think>I track it.</think><answer>{gold}</answer>"
        score = adapter.compute_score(row["data_source"], response, gold, row["extra_info"])
        assert score == score_one("paper", response, gold, prefill="").score == 3.0
