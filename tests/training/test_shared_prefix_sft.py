"""The supervised loss with each micro-batch's common prefix run once equals TRL's own (loss and gradient).

    pytest tests/training/test_shared_prefix_sft.py
"""

from __future__ import annotations

import pytest
import torch

from tomrl.training.shared_prompt import MIN_SHARED_PREFIX, common_prefix_length, shared_prefix_sft_trainer


def test_common_prefix_stops_before_the_first_trained_label_and_at_padding():
    ids = torch.tensor([[1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 9, 0], [1, 2, 3, 4, 5, 7]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]])
    labels = torch.full_like(ids, -100)
    assert common_prefix_length(ids, mask, labels) == 4  # position 4 differs between rows
    labels[2, 3] = 4  # row 2 trains on position 3: its prediction comes from position 2
    assert common_prefix_length(ids, mask, labels) == 2
    padded = mask.clone()
    padded[0, 1] = 0
    assert common_prefix_length(ids, padded, torch.full_like(ids, -100)) == 1


def _trainer(model_dir, tmp_path, shared: bool):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from tomrl.prompts import PAPER_A_SYSTEM_PROMPT

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    stories = ["Anna put the apple in the box.", "Bob moved the apple to the basket while Anna was away, then left.", "The ball is in the red_drawer."]
    rows = []
    for i, story in enumerate(stories):
        messages = [{"role": "system", "content": PAPER_A_SYSTEM_PROMPT}, {"role": "user", "content": story}]
        prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) + "<think>"
        rows.append({"prompt": prompt, "completion": f" trace {i} " * (i + 1) + "</think><answer>box</answer>"})
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    args = SFTConfig(output_dir=str(tmp_path / ("shared" if shared else "plain")), per_device_train_batch_size=3, report_to="none",
                     use_cpu=True, save_strategy="no", disable_tqdm=True, seed=0, gradient_checkpointing=False)
    trainer_class = shared_prefix_sft_trainer() if shared else SFTTrainer
    return trainer_class(model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tokenizer)


def _loss_and_gradient(trainer):
    batch = next(iter(trainer.get_train_dataloader()))
    trainer.model.train()
    trainer.model.zero_grad()
    loss = trainer.compute_loss(trainer.model, dict(batch))
    loss.backward()
    gradient = torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None])
    return batch, loss.detach(), gradient


def test_shared_prefix_loss_and_gradient_equal_trl(tiny_qwen2, tmp_path):
    batch, plain_loss, plain_gradient = _loss_and_gradient(_trainer(tiny_qwen2, tmp_path, shared=False))
    shared_trainer = _trainer(tiny_qwen2, tmp_path, shared=True)
    shared_batch, shared_loss, shared_gradient = _loss_and_gradient(shared_trainer)
    assert torch.equal(batch["input_ids"], shared_batch["input_ids"])
    # The case under test: a long common prefix (the system prompt) was found and used.
    assert common_prefix_length(batch["input_ids"], batch["attention_mask"], batch["labels"]) >= MIN_SHARED_PREFIX
    torch.testing.assert_close(shared_loss, plain_loss, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(shared_gradient, plain_gradient, rtol=1e-4, atol=1e-6)
    # The metrics TRL logs from the same outputs agree too.
    assert shared_trainer._metrics["train"]["mean_token_accuracy"]


def test_shared_prefix_changes_the_computation(tiny_qwen2, tmp_path, monkeypatch):
    """The comparison above can fail: cutting the prefix without its cache gives another loss."""
    from tomrl.training import shared_prompt

    original = shared_prompt.with_shared_prefix

    def without_cache(model, inputs, shared):
        cut = original(model, inputs, shared)
        cut.pop("past_key_values")
        cut["attention_mask"] = inputs["attention_mask"][:, shared:]
        return cut

    _, plain_loss, _ = _loss_and_gradient(_trainer(tiny_qwen2, tmp_path, shared=False))
    monkeypatch.setattr(shared_prompt, "with_shared_prefix", without_cache)
    _, broken_loss, _ = _loss_and_gradient(_trainer(tiny_qwen2, tmp_path, shared=True))
    assert not torch.allclose(broken_loss, plain_loss, rtol=1e-3)


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__])
