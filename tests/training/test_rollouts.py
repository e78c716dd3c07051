"""Rollouts from the slot decoder (tomrl.training.rollouts) in real TRL steps on the smoke config.

The trainer must score exactly the ids the decoder sampled, and the decoder's log-probabilities
must be those TRL computes for the sampling policy; both engines must train end to end.
"""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file
from test_train_smoke import VowelShareReward, read_rows
from test_train_smoke import smoke_config as smoke_run_config

from tomrl.models import resolve_model
from tomrl.training.config import TrainConfig
from tomrl.training.rollouts import rollout_seed, slot_rollouts_unavailable
from tomrl.training.run import train
from tomrl.training.trainer import TomrlGRPOTrainer


def smoke_config(tmp_path, *overrides: str) -> TrainConfig:
    return smoke_run_config(tmp_path, "report_to=[]", "precision=float32", *overrides)


@pytest.mark.parametrize("engine", ["slots", "transformers"])
def test_both_rollout_engines_train_two_steps(tmp_path, engine):
    cfg = smoke_config(tmp_path, f"rollout_engine={engine}", "max_steps=2", "max_completion_length=8", "learning_rate=1e-2")
    summary = train(cfg, rewards=[VowelShareReward(prefill="<think>")])
    assert summary.steps == 2
    run = tmp_path / "run"
    before = load_file(f"{resolve_model('tiny-qwen2')}/model.safetensors")
    after = load_file(run / "final" / "model.safetensors")
    assert any(not torch.equal(before[name], after[name]) for name in before), "no parameter changed"
    samples = read_rows(run / "samples.jsonl")
    assert [row["step"] for row in samples] == [1] * 4 + [2] * 4
    assert all(1 <= row["completion_tokens"] <= 8 for row in samples)


def test_trainer_scores_the_sampled_ids_with_the_samplers_logprobs(tmp_path, monkeypatch):
    """With two PPO epochs TRL computes the old policy's log-probabilities itself: they equal the sampler's."""
    sampled, scored = [], []
    original_sample, original_score = TomrlGRPOTrainer._sample_with_slots, TomrlGRPOTrainer._generate_and_score_completions

    def record_sample(self, prompt_ids):
        ids, logprobs = original_sample(self, prompt_ids)
        sampled.append((ids, logprobs))
        return ids, logprobs

    def record_score(self, inputs):
        output = original_score(self, inputs)
        scored.append({key: value.detach().clone() for key, value in output.items() if isinstance(value, torch.Tensor)})
        return output

    monkeypatch.setattr(TomrlGRPOTrainer, "_sample_with_slots", record_sample)
    monkeypatch.setattr(TomrlGRPOTrainer, "_generate_and_score_completions", record_score)
    # temperature and top_p away from 1 so that both reach the sampler; 24 tokens for a long comparison.
    cfg = smoke_config(tmp_path, "rollout_engine=slots", "max_steps=1", "num_iterations=2", "temperature=0.7", "top_p=0.9",
                       "max_completion_length=24")
    train(cfg)
    assert len(sampled) == 1 and len(scored) == 1
    ids, logprobs = sampled[0]
    output = scored[0]
    mask = output["completion_mask"].bool()
    for row, (row_ids, row_logprobs) in enumerate(zip(ids, logprobs)):
        assert output["completion_ids"][row][mask[row]].tolist() == row_ids  # exactly the sampled ids, in prompt order
        assert len(row_logprobs) == len(row_ids)
        trl_logps = output["old_per_token_logps"][row][mask[row]]
        assert torch.allclose(trl_logps, torch.tensor(row_logprobs), atol=1e-3), (trl_logps, row_logprobs)
        assert torch.equal(output["sampling_per_token_logps"][row][mask[row]], torch.tensor(row_logprobs))


def test_slot_rollouts_name_what_they_cannot_sample(tiny_model_dir):
    from transformers import AutoModelForCausalLM
    from trl import GRPOConfig

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    plain = dict(output_dir=str(tiny_model_dir / "unused"), use_cpu=True, report_to="none")
    assert slot_rollouts_unavailable(model, GRPOConfig(**plain)) is None
    assert "top_k" in slot_rollouts_unavailable(model, GRPOConfig(**plain, top_k=5))
    assert "repetition_penalty" in slot_rollouts_unavailable(model, GRPOConfig(**plain, repetition_penalty=1.1))


def test_rollout_engine_slots_refuses_vllm_and_lora(tmp_path):
    with pytest.raises(ValueError, match="rollout_engine=slots"):
        smoke_config(tmp_path, "rollout_engine=slots", "lora.enabled=true")
    with pytest.raises(ValueError, match="rollout_engine=slots"):
        smoke_config(tmp_path, "rollout_engine=slots", "use_vllm=true")


def test_rollout_seed_depends_on_every_part():
    seeds = {rollout_seed(0, 3, 0, 0), rollout_seed(1, 3, 0, 0), rollout_seed(0, 4, 0, 0), rollout_seed(0, 3, 1, 0),
             rollout_seed(0, 3, 0, 1)}
    assert len(seeds) == 5 and rollout_seed(0, 3, 0, 0) == rollout_seed(0, 3, 0, 0)
    assert all(0 <= seed < 2**63 for seed in seeds)
