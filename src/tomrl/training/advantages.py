"""Advantage maths for REINFORCE++ and REINFORCE++-baseline, as pure tensor functions.

GRPO's group-normalised advantages are TRL's own; this module holds what TRL does not have:
REINFORCE++ exactly as OpenRLHF defines it (``openrlhf/trainer/ppo_utils/experience_maker.py`` and
``openrlhf/models/utils.py``), which Paper B trains with: token rewards ``r_t = −β · kl_t`` plus the
outcome reward on the last valid token, returns ``G_t = Σ_{s ≥ t} γ^{s−t} r_s`` as advantages (no
critic), whitened over *all valid tokens of the batch*. REINFORCE++-baseline (OpenRLHF's
``reinforce_baseline``) first subtracts each prompt group's mean reward. docs/training.md walks
through the steps.

    from tomrl.training.advantages import AdvantageInputs, reinforce_pp_advantages
    advantages = reinforce_pp_advantages(AdvantageInputs(rewards, mask, group_size=8, logps=logps, ref_logps=ref_logps, kl_coef=0.001))

These two functions are what the trainer runs (registered in :mod:`tomrl.training.algorithms`);
tested against hand-computed values in ``tests/training/test_advantages.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal

import torch

KLEstimator = Literal["k1", "k2", "k3"]
# Sums a tensor over every training process; the identity on one process. Whitening needs
# global token statistics, so the trainer passes ``accelerator.reduce(..., "sum")`` here.
SumAcrossProcesses = Callable[[torch.Tensor], torch.Tensor]


def _identity(tensor: torch.Tensor) -> torch.Tensor:
    return tensor


def approx_kl(logps: torch.Tensor, ref_logps: torch.Tensor, estimator: KLEstimator = "k1") -> torch.Tensor:
    """Per-token estimate of KL(π ‖ π_ref) from the log-probabilities of the sampled tokens.

    ``k1 = log π − log π_ref``; ``k2 = (log π − log π_ref)² / 2``;
    ``k3 = exp(log π_ref − log π) − (log π_ref − log π) − 1`` (Schulman's low-variance estimator).
    """
    log_ratio = logps.float() - ref_logps.float()
    if estimator == "k1":
        return log_ratio
    if estimator == "k2":
        return log_ratio.pow(2) / 2.0
    if estimator == "k3":
        return torch.exp(-log_ratio) - 1.0 + log_ratio
    raise ValueError(f"unknown KL estimator {estimator!r}; expected k1, k2 or k3")


def last_token_index(mask: torch.Tensor) -> torch.Tensor:
    """Index of the last valid (mask == 1) token of each row; 0 for an all-masked row."""
    length = mask.size(1)
    flipped_first = mask.long().fliplr().argmax(dim=1)
    return length - 1 - flipped_first if length else flipped_first


def token_level_rewards(
    outcome_rewards: torch.Tensor, mask: torch.Tensor, kl: torch.Tensor | None = None, kl_coef: float = 0.0
) -> torch.Tensor:
    """``r_t = −kl_coef · kl_t`` on every token, plus the outcome reward on the last valid token.

    Shapes: ``outcome_rewards`` (B,), ``mask`` and ``kl`` (B, T). Masked tokens get 0. A row with
    no valid token carries no reward at all (it has no token to put it on).
    """
    mask = mask.to(torch.float32)
    rewards = torch.zeros_like(mask)
    if kl is not None and kl_coef > 0.0:
        rewards = rewards - kl_coef * kl.float()
    last = last_token_index(mask).unsqueeze(1)
    rewards = rewards.scatter_add(1, last, outcome_rewards.float().unsqueeze(1))
    return rewards * mask


def reverse_cumulative_returns(token_rewards: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0) -> torch.Tensor:
    """Returns ``G_t = Σ_{s ≥ t} γ^{s−t} r_s`` over valid tokens (masked rewards count as 0)."""
    rewards = token_rewards.float() * mask.float()
    returns = torch.zeros_like(rewards)
    running = torch.zeros(rewards.size(0), dtype=rewards.dtype, device=rewards.device)
    for t in reversed(range(rewards.size(1))):
        running = rewards[:, t] + gamma * running
        returns[:, t] = running
    return returns * mask.float()


def whiten_over_valid_tokens(
    values: torch.Tensor,
    mask: torch.Tensor,
    sum_across_processes: SumAcrossProcesses = _identity,
    eps: float = 1e-8,
) -> torch.Tensor:
    """``(x − mean) / sqrt(max(var, eps))`` with mean and population variance over all valid tokens.

    The statistics span every valid token of the whole batch (of every process, through
    ``sum_across_processes``), not each sequence. Masked positions are returned as 0.
    """
    mask = mask.float()
    values = values.float()
    totals = sum_across_processes(torch.stack([(values * mask).sum(), mask.sum()]))
    count = totals[1].clamp(min=1.0)
    mean = totals[0] / count
    squared = sum_across_processes(((values - mean).pow(2) * mask).sum())
    variance = squared / count
    return (values - mean) * variance.clamp(min=eps).rsqrt() * mask


def subtract_group_mean(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """Each reward minus the mean reward of its group (consecutive blocks of ``group_size``)."""
    if group_size < 1 or rewards.numel() % group_size != 0:
        raise ValueError(f"{rewards.numel()} rewards cannot be split into groups of {group_size}")
    grouped = rewards.float().view(-1, group_size)
    return (grouped - grouped.mean(dim=1, keepdim=True)).view(-1)


@dataclass(frozen=True)
class AdvantageInputs:
    """One generation batch as an algorithm's advantage function reads it (built by the trainer).

    ``rewards`` (N,): the weighted outcome reward of every completion of *every* process, in TRL's
    order (each prompt's ``group_size`` completions in a row; a group may span processes);
    ``rows``: this process's part of them, whose completion tokens ``mask`` (B, T) marks.
    ``logps`` and ``ref_logps`` (B, T): log-probabilities of the sampled tokens under the sampling
    policy and the reference, given where ``kl_coef`` > 0 (the KL goes into the rewards).
    """

    rewards: torch.Tensor
    mask: torch.Tensor
    group_size: int
    rows: slice = field(default_factory=lambda: slice(None))  # slices are unhashable (before 3.12): no plain default
    logps: torch.Tensor | None = None
    ref_logps: torch.Tensor | None = None
    kl_coef: float = 0.0
    kl_estimator: KLEstimator = "k1"
    gamma: float = 1.0
    sum_across_processes: SumAcrossProcesses = _identity

    @property
    def local_rewards(self) -> torch.Tensor:
        return self.rewards[self.rows].to(self.mask.device)


def reinforce_pp_advantages(batch: AdvantageInputs) -> torch.Tensor:
    """REINFORCE++ token advantages (B, T): KL-shaped token rewards, reverse cumsum, global whitening."""
    return _reinforce_pp(batch.local_rewards, batch)


def reinforce_pp_baseline_advantages(batch: AdvantageInputs) -> torch.Tensor:
    """REINFORCE++-baseline: subtract the group-mean reward, then as :func:`reinforce_pp_advantages`."""
    # Over every process's rewards, then sliced: a group may span processes.
    centred = subtract_group_mean(batch.rewards, batch.group_size)[batch.rows]
    return _reinforce_pp(centred.to(batch.mask.device), batch)


def _reinforce_pp(outcome_rewards: torch.Tensor, batch: AdvantageInputs) -> torch.Tensor:
    kl = None
    if batch.kl_coef > 0.0:
        if batch.logps is None or batch.ref_logps is None:
            raise ValueError("kl_coef > 0 needs the policy's and the reference's log-probabilities")
        kl = approx_kl(batch.logps, batch.ref_logps, batch.kl_estimator)
    rewards = token_level_rewards(outcome_rewards, batch.mask, kl, batch.kl_coef)
    returns = reverse_cumulative_returns(rewards, batch.mask, batch.gamma)
    return whiten_over_valid_tokens(returns, batch.mask, batch.sum_across_processes)
