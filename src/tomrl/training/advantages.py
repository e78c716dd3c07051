"""Advantage maths for REINFORCE++ and REINFORCE++-baseline, as pure tensor functions.

GRPO's group-normalised advantages are TRL's own (``GRPOTrainer``, ``scale_rewards="group"``);
this module holds what TRL does not have: REINFORCE++ exactly as OpenRLHF defines it
(``openrlhf/trainer/ppo_utils/experience_maker.py`` and ``openrlhf/models/utils.py``), which is
the algorithm Paper B trains with. For one batch of completions:

1. per-token KL to the reference policy, ``kl_t = log π_old(a_t) − log π_ref(a_t)`` (estimator
   ``k1``; ``k2`` and ``k3`` as in OpenRLHF's ``compute_approx_kl``);
2. token rewards ``r_t = −β · kl_t``, plus the outcome reward ``R`` on the last valid token;
3. returns as a reverse cumulative sum, ``G_t = Σ_{s ≥ t} γ^{s−t} r_s`` (γ = 1 by default);
   the advantage is the return (no critic);
4. whitening over *all valid tokens of the batch*: ``(A − mean) / sqrt(var)`` with the mean and
   the (population) variance taken over every unmasked token, the variance clamped at 1e-8.

REINFORCE++-baseline (OpenRLHF's ``reinforce_baseline``) first subtracts each prompt group's
mean outcome reward from its completions' rewards, then runs the same steps 2-4.

    from tomrl.training.advantages import reinforce_pp_advantages
    advantages = reinforce_pp_advantages(rewards, mask, logps, ref_logps, kl_coef=0.001)

Tested against hand-computed values in ``tests/training/test_advantages.py``.
"""

from __future__ import annotations

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


def reinforce_pp_advantages(
    outcome_rewards: torch.Tensor,
    mask: torch.Tensor,
    logps: torch.Tensor | None = None,
    ref_logps: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    kl_estimator: KLEstimator = "k1",
    gamma: float = 1.0,
    sum_across_processes: SumAcrossProcesses = _identity,
) -> torch.Tensor:
    """REINFORCE++ token advantages (B, T): KL-shaped token rewards, reverse cumsum, global whitening.

    ``logps`` are the log-probabilities of the sampled tokens under the policy that sampled them,
    ``ref_logps`` under the reference policy; both may be None when ``kl_coef`` is 0 (no KL term).
    """
    kl = None
    if kl_coef > 0.0:
        if logps is None or ref_logps is None:
            raise ValueError("kl_coef > 0 needs the policy's and the reference's log-probabilities")
        kl = approx_kl(logps, ref_logps, kl_estimator)
    rewards = token_level_rewards(outcome_rewards, mask, kl, kl_coef)
    returns = reverse_cumulative_returns(rewards, mask, gamma)
    return whiten_over_valid_tokens(returns, mask, sum_across_processes)


def reinforce_pp_baseline_advantages(
    outcome_rewards: torch.Tensor,
    mask: torch.Tensor,
    group_size: int,
    logps: torch.Tensor | None = None,
    ref_logps: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    kl_estimator: KLEstimator = "k1",
    gamma: float = 1.0,
    sum_across_processes: SumAcrossProcesses = _identity,
) -> torch.Tensor:
    """REINFORCE++-baseline: subtract the group-mean reward, then as :func:`reinforce_pp_advantages`.

    ``outcome_rewards`` must hold whole groups (consecutive blocks of ``group_size``), as in TRL.
    """
    centred = subtract_group_mean(outcome_rewards, group_size)
    return reinforce_pp_advantages(
        centred, mask, logps, ref_logps, kl_coef, kl_estimator, gamma, sum_across_processes
    )
