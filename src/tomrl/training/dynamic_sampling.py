"""DAPO-style dynamic sampling: replace prompt groups that carry no learning signal before the update.

A prompt group whose rollouts all receive the same total reward has zero group-relative advantage:
under GRPO (and REINFORCE++-baseline) it moves the policy only through the KL and entropy terms
and dilutes the step. With ``dynamic_sampling: true`` (``TrainConfig``) each step

1. generates and scores the scheduled batch as usual (round 0);
2. finds the zero-signal groups (:func:`group_has_signal`);
3. draws fresh prompts from the training set (:class:`ReplacementSampler`, seeded by the run's seed
   and the step, so a resumed run draws the same ones), generates and scores their groups, and puts
   groups with signal into the slots of the zero-signal ones (:func:`choose_groups`); repeated
   until every slot holds a group with signal or ``dynamic_sampling_max_rounds`` extra rounds ran;
4. slots still empty when the bound is reached keep their own zero-signal group from round 0 (the
   batch has a fixed size — TRL splits it into equal micro-batches — and round 0's group is the
   prompt the schedule asked for, so the step stays an ordinary step on that prompt);
5. merges the chosen rows of all rounds into one batch (:func:`merge_rows`, re-padded as TRL pads:
   prompts on the left, completions on the right) and recomputes what spans the batch: the token
   count TRL normalises the loss with, the GRPO advantages, and the rewards REINFORCE++ reads.

The step's logged metrics (reward, accuracy, lengths…) stay those of round 0, the scheduled prompts,
so the training curves keep meaning what they mean without dynamic sampling (the kept batch is
selected, hence biased towards ~50 % accuracy); ``tokens/generated`` counts every round. Added:
``dynamic_sampling/dropped_fraction`` (round 0's zero-signal groups / groups), ``dynamic_sampling/rounds``
(extra rounds generated) and ``dynamic_sampling/zero_signal_kept_fraction`` (groups of the update
without signal, > 0 only when the bound was reached). ``samples.jsonl`` keeps every scored rollout,
each marked ``round`` and ``kept`` (whether it is in the update).

Groups are never split: every process holds whole groups (checked in ``grpo_arguments``) and
chooses among its own, so no tensors move between processes; all processes draw the same
replacement prompts and take their own slice, as TRL's sampler does. Multimodal and tool-calling
batches are not supported (:func:`merge_rows` refuses keys it does not know).

Called by ``TomrlGRPOTrainer._generate_and_score_completions``; tested in
``tests/training/test_dynamic_sampling.py``.
"""

from __future__ import annotations

import math
import random
import re
from typing import Any, Callable, Sequence

import torch

# TRL's padding of each tensor of a generation batch (``GRPOTrainer._generate_and_score_completions``).
LEFT_PADDED = ("prompt_ids", "prompt_mask")
RIGHT_PADDED = (
    "completion_ids",
    "completion_mask",
    "old_per_token_logps",
    "ref_per_token_logps",
    "sampling_per_token_logps",
    "importance_sampling_ratio",
    "tool_mask",
)
PER_ROW = ("advantages",)
RECOMPUTED = ("num_items_in_batch",)  # spans all rows of every process: the caller recomputes it

# data._tag marks generated curriculum stages by an id prefix "stage<k>-".
_STAGE = re.compile(r"^(stage\d+)-")


# ----------------------------------------------------------------------------- which groups carry signal


def total_rewards(rewards_per_func: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Weighted sum over reward functions per rollout, NaN where every function returned None (as TRL)."""
    totals = (rewards_per_func * weights.to(rewards_per_func.device).unsqueeze(0)).nansum(dim=1)
    totals[torch.isnan(rewards_per_func).all(dim=1)] = torch.nan
    return totals


def group_has_signal(rewards: torch.Tensor, group_size: int, tolerance: float = 1e-6) -> torch.Tensor:
    """One bool per group of ``group_size`` consecutive rollouts: do their total rewards differ?

    Unscorable rollouts (NaN) are left out, as TRL leaves them out of the group baseline; a group
    with fewer than two scorable rollouts has no signal.
    """
    if rewards.numel() % group_size != 0:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group_size}")
    grouped = rewards.float().view(-1, group_size)
    scorable = ~torch.isnan(grouped)
    highest = torch.where(scorable, grouped, torch.full_like(grouped, -math.inf)).max(dim=1).values
    lowest = torch.where(scorable, grouped, torch.full_like(grouped, math.inf)).min(dim=1).values
    return (scorable.sum(dim=1) >= 2) & (highest - lowest > tolerance)


def choose_groups(signal_by_round: Sequence[torch.Tensor], slots: int) -> list[tuple[int, int]]:
    """The (round, group) filling each of ``slots`` slots: round 0's groups with signal in place, its
    zero-signal slots filled in order by the later rounds' groups with signal; a slot nothing fills
    keeps round 0's own group."""
    chosen = [(0, group) for group in range(slots)]
    empty = [group for group in range(slots) if not bool(signal_by_round[0][group])]
    replacements = [
        (round_index, group)
        for round_index, signal in enumerate(signal_by_round[1:], start=1)
        for group in range(len(signal))
        if bool(signal[group])
    ]
    for slot, replacement in zip(empty, replacements):
        chosen[slot] = replacement
    return chosen


def groups_to_request(missing: int, groups_seen: int, groups_with_signal: int, cap: int) -> int:
    """Groups per process to generate in the next round: the missing ones divided by the share of
    groups with signal seen so far (so one round usually suffices), at most ``cap`` (a full step)."""
    if missing <= 0:
        return 0
    if groups_with_signal == 0:
        return cap
    return min(cap, math.ceil(missing * groups_seen / groups_with_signal))


def grpo_advantages(rewards: torch.Tensor, group_size: int, scale_rewards: str) -> torch.Tensor:
    """TRL's GRPO advantages (``multi_objective_aggregation="sum_then_normalize"``) from total rewards.

    ``(r − group mean) / (std + 1e-4)``, with the std of the group (``group``), of the whole batch
    (``batch``) or no division (``none``); NaN (unscorable) rollouts are left out and get 0.
    """
    from trl.trainer.utils import nanstd

    grouped = rewards.view(-1, group_size)
    advantages = rewards - torch.nanmean(grouped, dim=1).repeat_interleave(group_size)
    if scale_rewards == "group":
        advantages = advantages / (nanstd(grouped, dim=1).repeat_interleave(group_size) + 1e-4)
    elif scale_rewards == "batch":
        advantages = advantages / (nanstd(rewards) + 1e-4)
    elif scale_rewards != "none":
        raise ValueError(f"unknown scale_rewards {scale_rewards!r}")
    return torch.nan_to_num(advantages, nan=0.0)


# ----------------------------------------------------------------------------- merging TRL's batches


def merge_rows(batches: Sequence[dict[str, Any]], picks: Sequence[tuple[int, int]], pad_token_id: int) -> dict[str, Any]:
    """One TRL generation batch made of rows ``(batch index, row index)`` of ``batches``, in order.

    Each padded tensor is widened to the widest contributing batch, on TRL's side for it (prompts on
    the left, completions and per-token values on the right), so every row keeps its tokens and
    values exactly. ``num_items_in_batch`` is left out: it counts every process's tokens.
    """
    used = sorted({batch for batch, _ in picks})
    keys = [key for key in batches[0] if key not in RECOMPUTED]
    unknown = [key for key in keys if key not in LEFT_PADDED + RIGHT_PADDED + PER_ROW]
    if unknown:
        raise ValueError(f"dynamic sampling cannot merge {unknown} (multimodal and tool batches are not supported)")
    merged: dict[str, Any] = {}
    for key in keys:
        tensors = {index: batches[index][key] for index in used}
        if key in PER_ROW and tensors[used[0]].dim() == 1:
            merged[key] = torch.stack([tensors[batch][row] for batch, row in picks])
            continue
        width = max(tensor.size(1) for tensor in tensors.values())
        side = "left" if key in LEFT_PADDED else "right"
        value = _pad_value(key, pad_token_id)
        widened = {index: _widen(tensor, width, side, value) for index, tensor in tensors.items()}
        merged[key] = torch.stack([widened[batch][row] for batch, row in picks])
    return merged


def _pad_value(key: str, pad_token_id: int) -> float | int:
    if key in ("prompt_ids", "completion_ids"):
        return pad_token_id
    return 1 if key == "tool_mask" else 0  # TRL pads tool_mask with 1 (it is multiplied by completion_mask)


def _widen(tensor: torch.Tensor, width: int, side: str, value: float | int) -> torch.Tensor:
    extra = width - tensor.size(1)
    if extra == 0:
        return tensor
    padding = tensor.new_full((tensor.size(0), extra), value)
    return torch.cat([padding, tensor] if side == "left" else [tensor, padding], dim=1)


# ----------------------------------------------------------------------------- replacement prompts


def curriculum_stage(example_id: Any) -> str | None:
    """The curriculum stage of a generated training row (``stage<k>``), or None outside a curriculum."""
    match = _STAGE.match(str(example_id)) if example_id is not None else None
    return match.group(1) if match else None


class ReplacementSampler:
    """Fresh training prompts for one step, drawn without repetition in a seeded order.

    The order depends only on the run's seed and the step, so every process draws the same prompts
    (each then takes its own slice) and a resumed run draws what the uninterrupted run drew. Prompts
    of the step's own batch are skipped, and with a curriculum only prompts of the batch's stages are
    drawn (a replacement must not jump ahead to a harder stage). When the candidates run out they are
    drawn again in a new order; with no candidate at all, any training prompt is drawn.
    """

    def __init__(self, ids: Sequence[Any], batch_ids: Sequence[Any], seed: int, step: int):
        stages = {curriculum_stage(example_id) for example_id in batch_ids}
        batch = set(batch_ids)
        in_stage = [index for index, example_id in enumerate(ids) if curriculum_stage(example_id) in stages]
        self.candidates = [index for index in in_stage if ids[index] not in batch] or in_stage or list(range(len(ids)))
        self.rng = random.Random(f"dynamic-sampling:{seed}:{step}")
        self.queue: list[int] = []

    def draw(self, count: int) -> list[int]:
        """The next ``count`` dataset indices."""
        drawn = []
        while len(drawn) < count:
            if not self.queue:
                self.queue = self.rng.sample(self.candidates, len(self.candidates))
            drawn.append(self.queue.pop())
        return drawn


# ----------------------------------------------------------------------------- the trainer's step


def sample_until_signal(trainer: Any, inputs: list[dict], generate_and_score: Callable[[list[dict]], dict]) -> dict:
    """TRL's generation batch for ``inputs`` with zero-signal groups replaced (see the module docstring).

    ``trainer`` is a ``TomrlGRPOTrainer``; ``generate_and_score`` is TRL's own
    ``_generate_and_score_completions``, which also scores, logs metrics and sample rows, and leaves
    every process's rewards in ``trainer._last_rewards_per_func``.
    """
    from accelerate.utils import gather_object

    cfg = trainer.train_config
    accelerator = trainer.accelerator
    group_size = trainer.num_generations
    weights = trainer.reward_weights
    if trainer.multi_objective_aggregation != "sum_then_normalize":
        raise ValueError("dynamic sampling recomputes TRL's sum_then_normalize advantages; other aggregations are not supported")
    if len(inputs) % group_size != 0:
        raise ValueError(f"dynamic sampling needs whole prompt groups on each process: {len(inputs)} rows, groups of {group_size}")
    slots = len(inputs) // group_size
    metrics = trainer._metrics["train"]
    samples_start = len(trainer.sample_rows)

    batches, rewards_by_round, signal_by_round, sample_counts = [], [], [], []

    def run_round(rows: list[dict]) -> None:
        before = len(trainer.sample_rows)
        batches.append(generate_and_score(rows))
        start = accelerator.process_index * len(rows)
        local = trainer._last_rewards_per_func[start : start + len(rows)]
        rewards_by_round.append(local)
        signal_by_round.append(group_has_signal(total_rewards(local, weights), group_size))
        sample_counts.append(len(trainer.sample_rows) - before)

    run_round(inputs)
    round_zero_lengths = {key: len(values) for key, values in metrics.items()}
    dropped = accelerator.reduce(torch.tensor([float((~signal_by_round[0]).sum()), float(slots)], device=accelerator.device), reduction="sum")
    sampler = None
    for _ in range(cfg.dynamic_sampling_max_rounds):
        have = sum(1 for round_index, group in choose_groups(signal_by_round, slots) if bool(signal_by_round[round_index][group]))
        # Every process runs the same rounds, of the same size (TRL gathers rewards across processes):
        # as many as the process missing the most groups needs.
        missing = int(accelerator.reduce(torch.tensor(slots - have, device=accelerator.device), reduction="max"))
        if missing == 0:
            break
        counts = torch.tensor([sum(len(s) for s in signal_by_round), sum(int(s.sum()) for s in signal_by_round)], device=accelerator.device)
        seen, with_signal = accelerator.reduce(counts, reduction="sum").tolist()
        per_process = groups_to_request(missing, seen, with_signal, cap=slots)
        if sampler is None:
            # Built from every process's prompts, so that all processes draw the same replacements.
            batch_ids = gather_object([row.get("id") for row in inputs])
            sampler = ReplacementSampler(_dataset_ids(trainer), batch_ids, cfg.seed, trainer.state.global_step)
        indices = sampler.draw(per_process * accelerator.num_processes)
        mine = indices[accelerator.process_index * per_process : (accelerator.process_index + 1) * per_process]
        run_round([dict(trainer.train_dataset[index]) for index in mine for _ in range(group_size)])
    extra_rounds = len(batches) - 1
    _keep_round_zero_metrics(metrics, round_zero_lengths)

    chosen = choose_groups(signal_by_round, slots)
    picks = [(round_index, group * group_size + member) for round_index, group in chosen for member in range(group_size)]
    output = merge_rows(batches, picks, trainer._tokenizer.pad_token_id)
    local_rewards = torch.stack([rewards_by_round[round_index][row] for round_index, row in picks])
    trainer._last_rewards_per_func = accelerator.gather(local_rewards)  # every process's kept rows, in TRL's order
    # Group-scaled advantages are the same as TRL's; batch-scaled ones must see the merged batch.
    advantages = grpo_advantages(total_rewards(trainer._last_rewards_per_func, weights), group_size, trainer.scale_rewards)
    output["advantages"] = advantages[accelerator.process_index * len(inputs) : (accelerator.process_index + 1) * len(inputs)]
    loss_mask = output["completion_mask"] if "tool_mask" not in output else output["completion_mask"] * output["tool_mask"]
    output["num_items_in_batch"] = accelerator.gather(loss_mask.sum()).sum()

    kept_zero = sum(1 for round_index, group in chosen if not bool(signal_by_round[round_index][group]))
    kept_zero_total = accelerator.reduce(torch.tensor(float(kept_zero), device=accelerator.device), reduction="sum")
    dropped_groups, all_groups = dropped.tolist()
    metrics["dynamic_sampling/dropped_fraction"].append(dropped_groups / all_groups)
    metrics["dynamic_sampling/rounds"].append(float(extra_rounds))
    metrics["dynamic_sampling/zero_signal_kept_fraction"].append(kept_zero_total.item() / all_groups)
    if cfg.log_samples:
        _mark_samples(trainer, samples_start, sample_counts, picks, [len(batch["completion_ids"]) for batch in batches])
    return output


def _dataset_ids(trainer: Any) -> list[Any]:
    dataset = trainer.train_dataset
    return list(dataset["id"]) if "id" in dataset.column_names else [None] * len(dataset)


def _keep_round_zero_metrics(metrics: dict[str, list], lengths: dict[str, int]) -> None:
    """Drop the values the extra rounds appended (the step reports its scheduled prompts), except
    that ``tokens/generated`` adds them up: generation cost counts every round."""
    for key in list(metrics):
        extra = metrics[key][lengths.get(key, 0) :]
        if not extra:
            continue
        del metrics[key][lengths.get(key, 0) :]
        if key == "tokens/generated" and metrics[key]:
            metrics[key][-1] += sum(extra)
        if not metrics[key]:
            del metrics[key]


def _mark_samples(trainer: Any, start: int, counts: list[int], picks: list[tuple[int, int]], sizes: list[int]) -> None:
    """Mark each sample row of this step with its round and whether it is in the update."""
    from accelerate.utils import gather_object

    kept = [[False] * size for size in sizes]
    for round_index, row in picks:
        kept[round_index][row] = True
    flags = [gather_object(round_flags) for round_flags in kept]  # process order, as the rows were gathered
    if not trainer.accelerator.is_main_process:
        return
    position = start
    for round_index, count in enumerate(counts):
        for offset in range(count):
            row = trainer.sample_rows[position + offset]
            row["round"], row["kept"] = round_index, bool(flags[round_index][offset])
        position += count


__all__ = [
    "ReplacementSampler",
    "choose_groups",
    "curriculum_stage",
    "group_has_signal",
    "groups_to_request",
    "grpo_advantages",
    "merge_rows",
    "sample_until_signal",
    "total_rewards",
]
