"""REINFORCE++ advantage maths against values computed by hand (OpenRLHF's definitions)."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from tomrl.training.advantages import (
    AdvantageInputs,
    approx_kl,
    last_token_index,
    reinforce_pp_advantages,
    reinforce_pp_baseline_advantages,
    reverse_cumulative_returns,
    subtract_group_mean,
    token_level_rewards,
    whiten_over_valid_tokens,
)

MASK = torch.tensor([[1, 1, 1], [1, 1, 0]])
LOGPS = torch.tensor([[-1.0, -2.0, -1.0], [-0.5, -1.0, 0.0]])
REF_LOGPS = torch.tensor([[-1.5, -1.0, -1.0], [-0.5, -2.0, 0.0]])


def close(actual: torch.Tensor, expected) -> None:
    assert_close(actual, torch.tensor(expected, dtype=actual.dtype), atol=1e-6, rtol=1e-6)


def test_kl_estimators():
    # log ratio = logp - ref = 0.5 for one token
    logp, ref = torch.tensor([-1.0]), torch.tensor([-1.5])
    assert approx_kl(logp, ref, "k1").item() == pytest.approx(0.5)
    assert approx_kl(logp, ref, "k2").item() == pytest.approx(0.125)
    # k3 = exp(-0.5) - 1 + 0.5
    assert approx_kl(logp, ref, "k3").item() == pytest.approx(math.exp(-0.5) - 0.5)
    with pytest.raises(ValueError, match="k4"):
        approx_kl(logp, ref, "k4")


def test_last_token_index():
    assert last_token_index(torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0]])).tolist() == [2, 1, 0]


def test_token_rewards_put_outcome_on_last_valid_token():
    kl = approx_kl(LOGPS, REF_LOGPS)  # [[0.5, -1, 0], [0, 1, 0]]
    rewards = token_level_rewards(torch.tensor([1.0, -1.0]), MASK, kl, kl_coef=0.1)
    expected = [[-0.05, 0.1, 1.0], [0.0, -0.1 - 1.0, 0.0]]
    close(rewards, expected)


def test_reverse_cumulative_returns():
    rewards = torch.tensor([[-0.05, 0.1, 1.0], [0.0, -1.1, 5.0]])  # 5.0 is masked out
    returns = reverse_cumulative_returns(rewards, MASK)
    close(returns, [[1.05, 1.1, 1.0], [-1.1, -1.1, 0.0]])
    discounted = reverse_cumulative_returns(torch.tensor([[1.0, 2.0, 4.0]]), torch.ones(1, 3), gamma=0.5)
    # G2 = 4, G1 = 2 + 0.5*4 = 4, G0 = 1 + 0.5*4 = 3
    close(discounted, [[3.0, 4.0, 4.0]])


def test_whitening_uses_all_valid_tokens_of_the_batch():
    values = torch.tensor([[1.05, 1.1, 1.0], [-1.1, -1.1, 99.0]])
    whitened = whiten_over_valid_tokens(values, MASK)
    # valid: 1.05, 1.1, 1.0, -1.1, -1.1 -> mean 0.19; squared deviations sum to 5.552 -> var 1.1104
    std = math.sqrt(5.552 / 5)
    expected = [[0.86 / std, 0.91 / std, 0.81 / std], [-1.29 / std, -1.29 / std, 0.0]]
    close(whitened, expected)


def test_whitening_reduces_statistics_across_processes():
    # Two "processes" holding one row each must whiten exactly like one process holding both.
    values = torch.tensor([[1.0, 2.0], [3.0, 7.0]])
    mask = torch.tensor([[1, 1], [1, 0]])
    together = whiten_over_valid_tokens(values, mask)

    def fake_all_reduce_for(row):
        def reduce(local):
            other = values[1 - row : 2 - row]
            other_mask = mask[1 - row : 2 - row].float()
            if local.dim() == 1:  # (sum, count)
                return local + torch.stack([(other * other_mask).sum(), other_mask.sum()])
            mean = (values * mask).sum() / mask.sum()
            return local + ((other - mean).pow(2) * other_mask).sum()

        return reduce

    for row in (0, 1):
        part = whiten_over_valid_tokens(values[row : row + 1], mask[row : row + 1], fake_all_reduce_for(row))
        close(part, together[row : row + 1].tolist())


def test_reinforce_pp_advantages_end_to_end():
    advantages = reinforce_pp_advantages(
        AdvantageInputs(torch.tensor([1.0, -1.0]), MASK, group_size=2, logps=LOGPS, ref_logps=REF_LOGPS, kl_coef=0.1, kl_estimator="k1")
    )
    std = math.sqrt(5.552 / 5)
    expected = [[0.86 / std, 0.91 / std, 0.81 / std], [-1.29 / std, -1.29 / std, 0.0]]
    close(advantages, expected)
    assert advantages.shape == MASK.shape


def test_reinforce_pp_without_kl_whitens_the_outcome_over_tokens():
    # No KL: every valid token's return is its sequence's reward: 3, 3, 3, -1, -1 -> mean 1.4
    advantages = reinforce_pp_advantages(AdvantageInputs(torch.tensor([3.0, -1.0]), MASK, group_size=2))
    std = math.sqrt((3 * 1.6**2 + 2 * 2.4**2) / 5)
    close(advantages, [[1.6 / std] * 3, [-2.4 / std, -2.4 / std, 0.0]])
    with pytest.raises(ValueError, match="log-probabilities"):
        reinforce_pp_advantages(AdvantageInputs(torch.tensor([3.0, -1.0]), MASK, group_size=2, kl_coef=0.1))


def test_group_mean_subtraction():
    assert subtract_group_mean(torch.tensor([3.0, -1.0, -3.0, -3.0]), 2).tolist() == [2.0, -2.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="groups of 3"):
        subtract_group_mean(torch.tensor([1.0, 2.0]), 3)


def test_reinforce_pp_baseline_subtracts_group_mean_then_whitens():
    mask = torch.tensor([[1, 1], [1, 0], [1, 1], [1, 1]])
    # rewards 3, -1 (group 1) -> 2, -2; -3, -3 (group 2) -> 0, 0. Valid token returns:
    # 2, 2, -2, 0, 0, 0, 0 -> mean 2/7
    advantages = reinforce_pp_baseline_advantages(AdvantageInputs(torch.tensor([3.0, -1.0, -3.0, -3.0]), mask, group_size=2))
    values = [2.0, 2.0, -2.0, 0.0, 0.0, 0.0, 0.0]
    mean = sum(values) / 7
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / 7)
    expected = [
        [(2 - mean) / std, (2 - mean) / std],
        [(-2 - mean) / std, 0.0],
        [-mean / std, -mean / std],
        [-mean / std, -mean / std],
    ]
    close(advantages, expected)


def test_baseline_takes_group_means_over_every_process_then_its_own_rows():
    # Two groups of 4 (means 0.5 and 2); this process holds rows 2-5, the second half of one and
    # the first half of the other: 2, -3 | 5, 1 centre to 1.5, -3.5 | 3, -1 (mean 0, one token each).
    batch = AdvantageInputs(torch.tensor([3.0, 0.0, 2.0, -3.0, 5.0, 1.0, 1.0, 1.0]), torch.ones(4, 1), group_size=4, rows=slice(2, 6))
    std = math.sqrt((1.5**2 + 3.5**2 + 3**2 + 1) / 4)
    close(reinforce_pp_baseline_advantages(batch), [[1.5 / std], [-3.5 / std], [3 / std], [-1 / std]])
    assert batch.local_rewards.tolist() == [2.0, -3.0, 5.0, 1.0]  # what reinforce_pp (no baseline) starts from


def test_constant_returns_do_not_divide_by_zero():
    advantages = reinforce_pp_advantages(AdvantageInputs(torch.tensor([1.0, 1.0]), torch.ones(2, 2), group_size=2))
    assert torch.isfinite(advantages).all()
    assert advantages.abs().max().item() == 0.0
