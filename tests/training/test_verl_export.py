"""veRL export: parquet schema, the launch script, and the compute_score adapter veRL loads by path."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tomrl.config import load_config
from tomrl.schema import read_examples
from tomrl.training.config import TrainConfig
from tomrl.training.verl_export import export_verl

REPO = Path(__file__).resolve().parents[2]
ADAPTER = REPO / "src" / "tomrl" / "training" / "verl_reward.py"


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
    assert f"custom_reward_function.path={ADAPTER}" in script
    assert "custom_reward_function.name=compute_score" in script
    assert f"data.train_files={exported.resolve() / 'train.parquet'}" in script
    assert "algorithm.adv_estimator=grpo" in script and "actor_rollout_ref.rollout.n=2" in script
    assert subprocess.run(["bash", "-n", str(exported / "run_verl.sh")]).returncode == 0


def test_paper_a_launch_settings(tmp_path):
    from tomrl.training.verl_export import launch_command

    cfg = load_config(TrainConfig, REPO / "configs/train/paper_a_qwen2.5-0.5b.yaml")
    script = launch_command(cfg, tmp_path, gpus=4, has_validation=True)
    for setting in ("algorithm.adv_estimator=grpo", "data.train_batch_size=8", "actor_rollout_ref.rollout.n=16",
                    "actor_rollout_ref.actor.optim.lr=5e-07", "actor_rollout_ref.actor.kl_loss_coef=0.001",
                    "actor_rollout_ref.actor.kl_loss_type=low_var_kl", "actor_rollout_ref.actor.entropy_coeff=0.001",
                    "actor_rollout_ref.actor.clip_ratio=0.2", "data.max_prompt_length=1024",
                    "data.max_response_length=2048", "actor_rollout_ref.rollout.temperature=1.0",
                    "trainer.total_epochs=2", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct"):
        assert setting in script, setting
    cfg_b = load_config(TrainConfig, REPO / "configs/train/paper_b_qwen2.5-7b.yaml")
    script_b = launch_command(cfg_b, tmp_path, gpus=4, has_validation=True)
    for setting in ("algorithm.adv_estimator=reinforce_plus_plus", "algorithm.use_kl_in_reward=True",
                    "actor_rollout_ref.rollout.n=8", "actor_rollout_ref.rollout.temperature=0.6", "trainer.total_epochs=10"):
        assert setting in script_b, setting


def test_rendered_prompt_format_matches_tomrl_training_prompts(tmp_path):
    cfg = load_config(TrainConfig, REPO / "configs/train/smoke_cpu.yaml", [f"run_dir={tmp_path / 'run'}"])
    export_verl(cfg, tmp_path, prompt_format="rendered")
    row = pq.read_table(tmp_path / "train.parquet").to_pylist()[0]
    assert len(row["prompt"]) == 1 and row["prompt"][0]["role"] == "user"
    assert row["prompt"][0]["content"].endswith("<|im_start|>assistant\n<think>")
    assert row["extra_info"]["prefill"] == "<think>"


def load_adapter_like_verl():
    # veRL imports the reward file by path (importlib spec_from_file_location), not as a package module.
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
