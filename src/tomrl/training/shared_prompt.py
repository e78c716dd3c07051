"""The GRPO loss's log-probabilities with each prompt run through the model once, not once per rollout.

    logps, entropies = shared_prompt_logps(model, input_ids, attention_mask, completion_length, autocast)
    batch = shuffle_prompt_groups(batch)   # TRL's row shuffle, but a prompt's rollouts stay together

:class:`tomrl.training.trainer.TomrlGRPOTrainer` scores its rollouts here when
``TrainConfig.share_prompt_forward`` is on and :func:`shared_prompt_unavailable` finds nothing
against it; else TRL's own forward runs. Tests: ``pytest tests/training/test_shared_prompt.py``.

Why: TRL's loss runs the model over every (prompt + completion) row. A GRPO step samples several
rollouts of each prompt and the prompts are much longer than the answers (the demo: ~330 prompt
tokens, ~73 completion tokens, 4 rollouts), so most of the forward and backward pass recomputes
the same prompt. Here every distinct prompt of a micro-batch goes through the backbone once, its
keys and values kept with their autograd graph; the cache is indexed out to the rows and only
the completions run on top of it. Causal attention makes the completions' log-probabilities those
of the full-row forward (up to float rounding: the batch shapes differ), and the gradient reaches
the prompt's pass from every rollout that read it, so the update is the same.

Layout of a row of length L with completion length C (prompt length P = L - C, left-padded):
the prompt's first P - 1 tokens build the cache; the suffix is the prompt's last token followed
by the completion, so its C + 1 outputs predict the C completion tokens (the last one predicts
nothing). Positions are the ones TRL's forward uses (0..L-1 over the padded row), so rotary
embeddings and the padding mask are as in the full row.

Where it does not apply: gradient checkpointing (the recomputed forward would append to the cache
a second time), several processes (DDP / DeepSpeed / FSDP expect one forward per backward),
multimodal inputs and MoE auxiliary losses; and a micro-batch whose rows all have different prompts
gains nothing, so it takes TRL's path.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Callable

import torch


def shared_prompt_unavailable(model: Any, accelerator: Any, gradient_checkpointing: bool) -> str | None:
    """Why the loss cannot share prompt passes for this trainer's ``model``, or None if it can."""
    if gradient_checkpointing:
        return "gradient checkpointing recomputes the forward, which would extend the shared cache twice"
    if accelerator.num_processes > 1:
        return "several processes: DDP, DeepSpeed and FSDP expect one forward per backward"
    if not callable(getattr(_backbone(model), "forward", None)):
        return f"'{type(model).__name__}' exposes no decoder backbone"
    return None


def prompt_groups(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(group_of_row, first_row_of_group)``: rows with the same padded prompt share a group (numbered by first appearance)."""
    keys = torch.cat([prompt_ids, prompt_mask.to(prompt_ids.dtype)], dim=1)
    _, inverse = torch.unique(keys, dim=0, return_inverse=True)
    # Renumber by first appearance so the result does not depend on unique's sort order.
    first_row: dict[int, int] = {}
    for row, key in enumerate(inverse.tolist()):
        first_row.setdefault(key, row)
    order = {key: number for number, key in enumerate(first_row)}
    group_of_row = torch.tensor([order[key] for key in inverse.tolist()], dtype=torch.long)
    return group_of_row, torch.tensor(list(first_row.values()), dtype=torch.long)


def shuffle_prompt_groups(batch: dict[str, Any]) -> dict[str, Any]:
    """TRL's ``shuffle_sequence_dict`` with whole prompt groups shuffled instead of single rows.

    TRL shuffles the rows of a generation batch before splitting it into micro-batches (so that,
    with several optimizer steps per generation, each step sees a mixed batch). Shuffling groups
    keeps that mixing across steps while a prompt's rollouts land in the same micro-batch, where
    their prompt is run once. Draws from the global torch generator, as TRL's shuffle does.
    """
    group_of_row, first_rows = prompt_groups(batch["prompt_ids"], batch["prompt_mask"])
    rank = torch.empty(len(first_rows), dtype=torch.long)
    rank[torch.randperm(len(first_rows))] = torch.arange(len(first_rows))
    permutation = torch.sort(rank[group_of_row], stable=True).indices

    def permute(value: Any) -> Any:
        if value is None or (isinstance(value, torch.Tensor) and value.ndim == 0):
            return value
        if isinstance(value, torch.Tensor):
            return value[permutation.to(value.device)]
        return [value[i] for i in permutation.tolist()]

    return {key: permute(value) for key, value in batch.items()}


def shared_prompt_logps(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    completion_length: int,
    autocast: Callable[[], AbstractContextManager],
    compute_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """Per-token log-probabilities (and entropies) of the last ``completion_length`` tokens of each row.

    ``model`` carries TRL's fused LM head (``fused_lm_head=True`` returns ``log_probs`` and
    ``entropy`` instead of logits, with its temperature). Returns None when no two rows share a
    prompt (nothing to gain: the caller runs its own forward).
    """
    prompt_length = input_ids.size(1) - completion_length
    if prompt_length < 2 or completion_length < 1:
        return None
    prompt_ids, prompt_mask = input_ids[:, :prompt_length], attention_mask[:, :prompt_length]
    group_of_row, first_rows = prompt_groups(prompt_ids.cpu(), prompt_mask.cpu())
    if len(first_rows) == input_ids.size(0):
        return None
    group_of_row, first_rows = group_of_row.to(input_ids.device), first_rows.to(input_ids.device)
    with autocast():
        # The prompts without their last token: only the keys and values are needed from this pass.
        cache = prefix_cache(model, prompt_ids[first_rows, :-1], prompt_mask[first_rows, :-1], group_of_row)
        suffix = input_ids[:, prompt_length - 1 :]
        labels = input_ids[:, prompt_length:].masked_fill(attention_mask[:, prompt_length:] == 0, -100)
        shift_labels = torch.cat([labels, labels.new_full((labels.size(0), 1), -100)], dim=1)
        outputs = model(
            input_ids=suffix,
            attention_mask=attention_mask,
            past_key_values=cache,
            shift_labels=shift_labels,
            fused_lm_head=True,
        )
    logps = outputs.log_probs[:, :completion_length]
    entropies = outputs.entropy[:, :completion_length] if compute_entropy else None
    return logps, entropies


def prefix_cache(model: Any, prefix_ids: torch.Tensor, prefix_mask: torch.Tensor, prefix_of_row: torch.Tensor) -> Any:
    """Keys and values of the distinct ``prefix_ids`` rows, one backbone pass with their autograd graph,
    indexed out so that row ``i`` of the cache holds prefix ``prefix_of_row[i]``."""
    from transformers import DynamicCache

    cache = DynamicCache(config=_unwrapped(model).config)
    _backbone(model)(input_ids=prefix_ids, attention_mask=prefix_mask, past_key_values=cache, use_cache=True)
    cache.batch_select_indices(prefix_of_row)
    return cache


def _unwrapped(model: Any) -> Any:
    from accelerate.utils import is_peft_model

    return model.get_base_model() if is_peft_model(model) else model


def _backbone(model: Any) -> Any:
    """The decoder stack under the LM head (for PEFT: the base model's, which carries the adapters)."""
    inner = _unwrapped(model)
    return getattr(inner, inner.base_model_prefix, None) if hasattr(inner, "base_model_prefix") else None


# Supervised fine-tuning (the warm start and the study's sft/rft arms): every row of a micro-batch starts
# with the same system prompt and chat header (~190 of the demo's ~430 tokens per row). The same idea as
# above, one level simpler: the rows' common prefix runs through the backbone once, its keys and values are
# repeated to every row, and the rest of each row runs on top, so the loss and its gradient are those of the
# full rows (up to float rounding) for about a third less work per warm-start step in the demo.
MIN_SHARED_PREFIX = 16  # a shorter common prefix is not worth a separate pass


def common_prefix_length(input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor) -> int:
    """Leading positions that every row shares (same token, not padding), stopping before any row's
    first trained label: the suffix pass predicts labels from its own outputs, and the label at its
    first position would be predicted by the prefix pass, which computes no logits."""
    same = (input_ids == input_ids[:1]).all(dim=0) & attention_mask.bool().all(dim=0)
    shared = int(same.long().cumprod(dim=0).sum())
    trained = (labels != -100).any(dim=0).nonzero()
    first_trained = int(trained[0]) if len(trained) else input_ids.size(1)
    return max(0, min(shared, first_trained - 1, input_ids.size(1) - 1))


def with_shared_prefix(model: Any, inputs: dict[str, Any], shared: int) -> dict[str, Any]:
    """``inputs`` for ``model(**inputs)`` with their first ``shared`` positions run once: the prefix's
    keys and values (with their autograd graph) go in ``past_key_values``, repeated to every row; the
    per-token tensors keep only the suffix (``attention_mask`` keeps the full length, as a cache needs)."""
    input_ids = inputs["input_ids"]
    rows, length = input_ids.shape
    every_row = torch.zeros(rows, dtype=torch.long, device=input_ids.device)
    cache = prefix_cache(model, input_ids[:1, :shared], inputs["attention_mask"][:1, :shared], every_row)
    suffix = {
        key: value[:, shared:] if isinstance(value, torch.Tensor) and value.ndim == 2 and value.shape == (rows, length) and key != "attention_mask" else value
        for key, value in inputs.items()
    }
    suffix["past_key_values"] = cache
    return suffix


def shared_prefix_sft_trainer():
    """TRL's ``SFTTrainer`` whose training loss runs each micro-batch's common prefix once (see above);
    evaluation, single rows, short prefixes and the cases :func:`shared_prompt_unavailable` names take
    TRL's own path. (A function so that importing this module does not import TRL's SFT stack.)"""
    from trl import SFTTrainer

    class SharedPrefixSFTTrainer(SFTTrainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if model.training and inputs["input_ids"].size(0) > 1 and "labels" in inputs and "attention_mask" in inputs:
                reason = shared_prompt_unavailable(model, self.accelerator, self.args.gradient_checkpointing)
                shared = common_prefix_length(inputs["input_ids"], inputs["attention_mask"], inputs["labels"])
                if reason is None and shared >= MIN_SHARED_PREFIX:
                    inputs = with_shared_prefix(model, inputs, shared)
            return super().compute_loss(model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch)

    return SharedPrefixSFTTrainer
