"""Real TRL steps on the smoke config (tiny Qwen2, generated stories): every algorithm updates the policy."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from tomrl.config import load_config
from tomrl.models import resolve_model
from tomrl.rewards.functions import Reward, RewardResult, completion_text
from tomrl.training.config import TrainConfig
from tomrl.training.run import train

SMOKE = "configs/train/smoke_cpu.yaml"


class VowelShareReward(Reward):
    """A reward that varies between random completions (the registry's rewards are all -3 for a random
    model, which gives every completion the same reward and so no gradient)."""

    name = "vowel_share"
    needs = ()

    def score(self, completion, answer=None, prefill=None, **columns):
        text = completion_text(completion)
        share = sum(c in "aeiou" for c in text.lower()) / max(len(text), 1)
        return RewardResult(self.name, share, False, False, None, {"vowels": share})


def smoke_config(tmp_path, *overrides: str) -> TrainConfig:
    return load_config(
        TrainConfig,
        SMOKE,
        [f"run_dir={tmp_path / 'run'}", "eval.at_start=false", "eval.every_steps=0", "progress=false", *overrides],
    )


def read_rows(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("algorithm", ["grpo", "reinforce_pp", "reinforce_pp_baseline"])
def test_algorithm_takes_real_steps_and_changes_parameters(tmp_path, algorithm):
    cfg = smoke_config(tmp_path, f"algorithm={algorithm}", "max_steps=2", "rollouts_per_prompt=4", "micro_batch_size=8",
                       "max_completion_length=8")
    summary = train(cfg, rewards=[VowelShareReward(prefill="<think>")])
    assert summary.steps == 2
    run = tmp_path / "run"
    before = load_file(f"{resolve_model('tiny-qwen2')}/model.safetensors")
    after = load_file(run / "final" / "model.safetensors")
    changed = [name for name in before if not torch.equal(before[name], after[name])]
    assert changed, "no parameter changed after two optimizer steps"
    rows = read_rows(run / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2]
    for row in rows:
        assert row["grad_norm"] > 0
        for key in ("reward", "answer/accuracy", "answer/format_rate", "response_length/mean", "response_length/max",
                    "response_length/min", "response_length/clipped_ratio", "entropy", "step_time",
                    "tokens_per_s/generated", "tokens_per_s/trained", "reward_components/vowel_share/vowels"):
            assert key in row, key
    if algorithm == "reinforce_pp":
        assert "kl" in rows[0]  # the in-reward KL is logged by tomrl
    samples = read_rows(run / "samples.jsonl")
    assert len(samples) == 2 * 2 * 4  # steps x prompts x rollouts
    assert (run / "tensorboard").is_dir() and any((run / "tensorboard").iterdir())
    assert (run / "checkpoints" / "checkpoint-2" / "model.safetensors").exists()


def test_validation_and_best_checkpoint(tmp_path):
    cfg = smoke_config(tmp_path, "max_steps=1", "eval.at_start=true", "eval.every_steps=1")
    summary = train(cfg)
    run = tmp_path / "run"
    validations = read_rows(run / "validation.jsonl")
    assert [v["step"] for v in validations] == [0, 1]
    first = validations[0]
    assert first["accuracy"]["n"] == 4 and 0.0 <= first["accuracy"]["low"] <= first["accuracy"]["high"] <= 1.0
    assert set(first["by_order"]) == {"0", "1"}
    best = json.loads((run / "best" / "best.json").read_text())
    assert best["step"] in (0, 1) and best["split"] == "validation"
    assert (run / "best" / "model.safetensors").exists()
    assert summary.first_validation["step"] == 0


def test_new_run_refuses_a_run_dir_holding_a_finished_run(tmp_path):
    # A folder whose run stopped before its first checkpoint is taken over (tests/reliability/
    # test_failed_runs.py); one that holds results is never overwritten by a new run.
    from tomrl.config import ConfigError

    cfg = smoke_config(tmp_path, "max_steps=1")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.yaml").write_text("model: x\n")
    (tmp_path / "run" / "summary.json").write_text("{}\n")
    with pytest.raises(ConfigError, match="--resume"):
        train(cfg)


def test_lora_trains_an_adapter_and_leaves_the_base_weights(tmp_path):
    cfg = smoke_config(tmp_path, "lora.enabled=true", "lora.rank=4", "max_steps=1", "rollouts_per_prompt=4",
                       "micro_batch_size=8", "max_completion_length=8", "learning_rate=1e-2")
    train(cfg, rewards=[VowelShareReward(prefill="<think>")])
    final = tmp_path / "run" / "final"
    adapter = load_file(final / "adapter_model.safetensors")
    assert adapter and all("lora_" in name for name in adapter)
    lora_b = [t for name, t in adapter.items() if "lora_B" in name]
    assert any(t.abs().sum() > 0 for t in lora_b), "LoRA B matrices are still zero: the adapter did not train"
    assert not (final / "model.safetensors").exists()


def test_every_steps_zero_means_no_validation_at_all(tmp_path):
    # eval.every_steps=0 is "never": not at the start either (at_start's default is true).
    cfg = load_config(TrainConfig, SMOKE, [f"run_dir={tmp_path / 'run'}", "eval.every_steps=0", "eval.at_start=true", "progress=false",
                                           "max_steps=1", "rollouts_per_prompt=2", "max_completion_length=4"])
    summary = train(cfg, rewards=[VowelShareReward(prefill="<think>")])
    assert summary.steps == 1 and summary.first_validation is None and summary.last_validation is None
    assert not (tmp_path / "run" / "validation.jsonl").exists() and not (tmp_path / "run" / "best").exists()
