"""Master weights are float32 on every path; bf16 / fp16 precision is autocast of the compute only.

With the weights themselves in bfloat16, AdamW's update at Paper A's learning rate (5e-7) falls below
bf16's resolution for most weights: the run looks normal and learns nothing. These tests take a real
step at that learning rate and check that it reaches the weights, in float32 and in bf16 precision.
"""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from tomrl.models import model_init_kwargs, resolve_model
from tomrl.training.run import grpo_arguments, train

from tests.training.test_train_smoke import VowelShareReward, smoke_config

PAPER_A_LR = "5.0e-7"


def changed_share(before: dict, after: dict) -> float:
    changed = sum(int((before[name].float() != after[name].float()).sum()) for name in before)
    return changed / sum(t.numel() for t in before.values())


@pytest.mark.parametrize("precision", ["float32", "bfloat16", "float16"])
def test_every_precision_loads_float32_master_weights(tmp_path, precision):
    # The dtype the policy and reference model load in no longer depends on the precision or the device.
    args = grpo_arguments(smoke_config(tmp_path, f"precision={precision}"))
    assert args.model_init_kwargs["dtype"] is torch.float32 and args.model_init_kwargs["use_safetensors"] is True
    assert model_init_kwargs()["dtype"] is torch.float32


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_a_step_at_paper_a_learning_rate_reaches_the_weights(tmp_path, precision):
    cfg = smoke_config(tmp_path, f"precision={precision}", "max_steps=1", "rollouts_per_prompt=4", "micro_batch_size=8",
                       "max_completion_length=8", f"learning_rate={PAPER_A_LR}", "kl_coef=0.0")
    summary = train(cfg, rewards=[VowelShareReward(prefill="<think>")])
    assert summary.steps == 1 and summary.parameter_dtype == "float32" and summary.precision == precision
    before = load_file(f"{resolve_model('tiny-qwen2')}/model.safetensors")
    after = load_file(tmp_path / "run" / "final" / "model.safetensors")
    assert {t.dtype for t in after.values()} == {torch.float32}
    assert changed_share(before, after) > 0.9, changed_share(before, after)


def test_bf16_stored_weights_would_not_learn_at_that_rate():
    # What the test above guards against (so it can fail): the same AdamW update on weights stored in
    # bfloat16 leaves nearly all of them unchanged.
    torch.manual_seed(0)
    shares = {}
    for dtype in (torch.float32, torch.bfloat16):
        weights = torch.nn.Parameter((torch.randn(256, 256) * 0.02).to(dtype))
        before = weights.detach().clone()
        optimizer = torch.optim.AdamW([weights], lr=float(PAPER_A_LR), weight_decay=0.01)
        weights.grad = torch.randn_like(weights)
        optimizer.step()
        shares[dtype] = float((weights.detach() != before).float().mean())
    assert shares[torch.float32] > 0.99 and shares[torch.bfloat16] < 0.05, shares

