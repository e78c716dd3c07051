"""Dynamic sampling: which groups carry signal, how batches are merged, and real TRL steps with it on."""

from __future__ import annotations

import hashlib

import math

import pytest
import torch
from test_train_smoke import read_rows
from test_train_smoke import smoke_config as smoke_run_config

from tomrl.config import ConfigError, load_config
from tomrl.rewards.functions import Reward, RewardResult, completion_text
from tomrl.training.config import TrainConfig
from tomrl.training.dynamic_sampling import (
    ReplacementSampler,
    choose_groups,
    curriculum_stage,
    group_has_signal,
    groups_to_request,
    grpo_advantages,
    merge_rows,
    total_rewards,
)

SMOKE = "configs/train/smoke_cpu.yaml"
NAN = float("nan")

# ----------------------------------------------------------------------------- pure functions


def test_zero_signal_groups_are_found_per_group():
    rewards = torch.tensor([1.0, 1.0, 1.0, 2.0, NAN, 3.0, NAN, NAN, -3.0, -3.0, 0.5, 0.5 + 1e-9])
    assert group_has_signal(rewards, 2).tolist() == [False, True, False, False, False, False]
    # NaN rollouts are left out of the comparison, as TRL leaves them out of the baseline.
    assert group_has_signal(torch.tensor([NAN, 1.0, 2.0, 1.0, NAN, 1.0]), 3).tolist() == [True, False]
    with pytest.raises(ValueError, match="groups of 4"):
        group_has_signal(torch.zeros(6), 4)


def test_total_rewards_weight_the_functions_and_keep_unscorable_rows_nan():
    per_func = torch.tensor([[1.0, 2.0], [NAN, 1.0], [NAN, NAN]])
    totals = total_rewards(per_func, torch.tensor([1.0, 0.5]))
    assert totals[:2].tolist() == [2.0, 0.5] and math.isnan(totals[2])


def test_zero_signal_slots_are_filled_by_later_groups_with_signal_in_order():
    rounds = [torch.tensor([True, False, True, False]), torch.tensor([False, True]), torch.tensor([True, True])]
    assert choose_groups(rounds, 4) == [(0, 0), (1, 1), (0, 2), (2, 0)]
    # Not enough groups with signal: the slot keeps its own round-0 group.
    assert choose_groups([torch.tensor([False, False]), torch.tensor([True, False])], 2) == [(1, 0), (0, 1)]
    assert choose_groups([torch.tensor([False, True])], 2) == [(0, 0), (0, 1)]


def test_groups_requested_follow_the_share_with_signal_up_to_a_full_step():
    assert groups_to_request(0, 8, 0, cap=8) == 0
    assert groups_to_request(3, 8, 0, cap=8) == 8  # nothing had signal: a full step
    assert groups_to_request(2, 8, 4, cap=8) == 4  # half had signal: twice the missing ones
    assert groups_to_request(3, 8, 1, cap=8) == 8


def test_grpo_advantages_match_hand_computed_values():
    rewards = torch.tensor([1.0, 3.0, 2.0, 2.0])
    assert torch.allclose(grpo_advantages(rewards, 2, "none"), torch.tensor([-1.0, 1.0, 0.0, 0.0]))
    std = math.sqrt(2.0)  # Bessel-corrected std of (1, 3), as TRL's nanstd
    assert torch.allclose(grpo_advantages(rewards, 2, "group"), torch.tensor([-1 / (std + 1e-4), 1 / (std + 1e-4), 0.0, 0.0]))
    batch_std = torch.tensor([1.0, 3.0, 2.0, 2.0]).std().item()
    assert torch.allclose(grpo_advantages(rewards, 2, "batch"), torch.tensor([-1.0, 1.0, 0.0, 0.0]) / (batch_std + 1e-4))
    assert grpo_advantages(torch.tensor([NAN, 1.0]), 2, "group").tolist() == [0.0, 0.0]


PAD = 99


def batch(prompts: list[list[int]], completions: list[list[int]], advantages: list[float]) -> dict:
    """A generation batch padded as TRL pads it: prompts on the left, completions on the right."""
    prompt_width = max(map(len, prompts))
    completion_width = max(map(len, completions))
    prompt_ids = torch.tensor([[PAD] * (prompt_width - len(p)) + p for p in prompts])
    prompt_mask = torch.tensor([[0] * (prompt_width - len(p)) + [1] * len(p) for p in prompts])
    completion_ids = torch.tensor([c + [PAD] * (completion_width - len(c)) for c in completions])
    completion_mask = torch.tensor([[1] * len(c) + [0] * (completion_width - len(c)) for c in completions])
    logps = torch.tensor([[-0.1 * t for t in c] + [0.0] * (completion_width - len(c)) for c in completions])
    return {
        "prompt_ids": prompt_ids,
        "prompt_mask": prompt_mask,
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "old_per_token_logps": logps,
        "ref_per_token_logps": logps * 2,
        "advantages": torch.tensor(advantages),
        "num_items_in_batch": completion_mask.sum(),
    }


def unpadded_row(merged: dict, row: int) -> tuple[list[int], list[int], list[float], float]:
    prompt = merged["prompt_ids"][row][merged["prompt_mask"][row].bool()].tolist()
    mask = merged["completion_mask"][row].bool()
    return prompt, merged["completion_ids"][row][mask].tolist(), merged["old_per_token_logps"][row][mask].tolist(), merged["advantages"][row].item()


def test_merging_rows_of_differently_padded_batches_keeps_every_row_exactly():
    first = batch([[1, 2], [3]], [[10, 11, 12], [13]], [0.5, -0.5])
    second = batch([[4, 5, 6], [7]], [[20], [21, 22]], [1.5, -1.5])
    merged = merge_rows([first, second], [(1, 0), (0, 1), (1, 1), (0, 0)], PAD)
    assert "num_items_in_batch" not in merged  # spans every process: the caller recomputes it
    assert merged["prompt_ids"].shape == (4, 3) and merged["completion_ids"].shape == (4, 3)
    assert [unpadded_row(merged, r) for r in range(4)] == [
        ([4, 5, 6], [20], pytest.approx([-2.0]), 1.5),
        ([3], [13], pytest.approx([-1.3]), -0.5),
        ([7], [21, 22], pytest.approx([-2.1, -2.2]), -1.5),
        ([1, 2], [10, 11, 12], pytest.approx([-1.0, -1.1, -1.2]), 0.5),
    ]
    # Padding is on TRL's side: prompts left-padded, completions right-padded, with the pad token.
    assert merged["prompt_ids"][1].tolist() == [PAD, PAD, 3] and merged["prompt_mask"][1].tolist() == [0, 0, 1]
    assert merged["completion_ids"][3].tolist() == [10, 11, 12] and merged["completion_ids"][0].tolist() == [20, PAD, PAD]
    assert torch.equal(merged["ref_per_token_logps"], merged["old_per_token_logps"] * 2)


def test_merging_refuses_keys_it_cannot_pad():
    odd = {**batch([[1]], [[2]], [0.0]), "pixel_values": torch.zeros(1, 3)}
    with pytest.raises(ValueError, match="pixel_values"):
        merge_rows([odd], [(0, 0)], PAD)


def test_replacement_prompts_are_seeded_by_seed_and_step_and_skip_the_batch():
    ids = [f"q{i}" for i in range(10)]
    draw = ReplacementSampler(ids, ["q0", "q1"], seed=0, step=3).draw(8)
    assert draw == ReplacementSampler(ids, ["q0", "q1"], seed=0, step=3).draw(8)  # a resumed run draws the same
    assert draw != ReplacementSampler(ids, ["q0", "q1"], seed=0, step=4).draw(8)
    assert sorted(draw) == list(range(2, 10))  # no repeats until the candidates run out, the batch skipped
    assert len(ReplacementSampler(ids, ["q0"], seed=0, step=0).draw(20)) == 20  # then drawn again


def test_replacements_stay_in_the_batch_curriculum_stage():
    ids = ["stage0-a", "stage0-b", "stage0-c", "stage1-a", "stage1-b"]
    assert curriculum_stage("stage1-a") == "stage1" and curriculum_stage("plain") is None and curriculum_stage(None) is None
    assert set(ReplacementSampler(ids, ["stage0-a"], seed=1, step=0).draw(6)) == {1, 2}
    assert set(ReplacementSampler(ids, ["stage1-a", "stage1-b"], seed=1, step=0).draw(2)) == {3, 4}  # only the batch left


@pytest.mark.parametrize("overrides", [["dynamic_sampling_max_rounds=0"], ["dynamic_sampl=true"]])
def test_bad_dynamic_sampling_settings_are_errors(overrides):
    with pytest.raises(ConfigError, match="dynamic_sampl"):
        load_config(TrainConfig, SMOKE, overrides)


def test_groups_split_across_processes_are_refused(monkeypatch):
    from tomrl.training.run import grpo_arguments

    monkeypatch.setenv("WORLD_SIZE", "2")  # 1 prompt x 4 rollouts over 2 processes: 2 rollouts of a group each
    cfg = load_config(TrainConfig, SMOKE, ["dynamic_sampling=true", "prompts_per_step=1", "rollouts_per_prompt=4"])
    with pytest.raises(ConfigError, match="whole prompt groups"):
        grpo_arguments(cfg)


# ----------------------------------------------------------------------------- real TRL steps


class OrderOneVowels(Reward):
    """On order-1 questions a number drawn from the completion's text (different texts tie with
    probability 2^-32; a vowel share tied now and then, which made a group of two signal-free), 0 on
    order-0 ones (every rollout the same: a group with no signal)."""

    name = "order_one_vowels"
    needs = ("order",)

    def score(self, completion, answer=None, prefill=None, **columns):
        text = completion_text(completion)
        share = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") / 2**32 if columns["order"] == 1 else 0.0
        return RewardResult(self.name, share, False, False, None, {"share": share})


def smoke_config(tmp_path, *overrides: str) -> TrainConfig:
    return smoke_run_config(tmp_path, "max_steps=2", "dynamic_sampling=true", "max_completion_length=8", *overrides)


def test_all_zero_signal_groups_are_dropped_and_training_still_proceeds(tmp_path):
    from tomrl.training.run import train

    # A random tiny model never closes its tags: Paper A's reward gives every rollout -3, no group has signal.
    cfg = smoke_config(tmp_path, "dynamic_sampling_max_rounds=2")
    summary = train(cfg)
    assert summary.steps == 2
    rows = read_rows(tmp_path / "run" / "metrics.jsonl")
    assert [row["step"] for row in rows] == [1, 2]
    for row in rows:
        assert row["dynamic_sampling/dropped_fraction"] == 1.0
        assert row["dynamic_sampling/rounds"] == 2.0  # the bound was reached
        assert row["dynamic_sampling/zero_signal_kept_fraction"] == 1.0
        assert row["reward"] == -3.0
    samples = read_rows(tmp_path / "run" / "samples.jsonl")
    # Per step: 2 prompts x 2 rollouts scheduled, and two extra rounds of a full step each.
    assert len(samples) == 2 * 3 * 4
    for step in (1, 2):
        of_step = [s for s in samples if s["step"] == step]
        assert [s["round"] for s in of_step] == [0] * 4 + [1] * 4 + [2] * 4
        assert [s["kept"] for s in of_step] == [True] * 4 + [False] * 8  # the scheduled groups are kept


@pytest.mark.parametrize("algorithm", ["grpo", "reinforce_pp_baseline"])
def test_groups_with_varying_rewards_are_kept_and_zero_signal_ones_replaced(tmp_path, algorithm):
    from tomrl.training.run import train

    cfg = smoke_config(tmp_path, f"algorithm={algorithm}", "prompts_per_step=4", "micro_batch_size=4",
                       "dynamic_sampling_max_rounds=3")
    summary = train(cfg, rewards=[OrderOneVowels(prefill="<think>")])
    assert summary.steps == 2
    metrics = {row["step"]: row for row in read_rows(tmp_path / "run" / "metrics.jsonl")}
    samples = read_rows(tmp_path / "run" / "samples.jsonl")
    assert any(s["kept"] and s["round"] > 0 for s in samples), "no zero-signal group was replaced"
    for step in (1, 2):
        of_step = [s for s in samples if s["step"] == step]
        scheduled = [s for s in of_step if s["round"] == 0]
        kept = [s for s in of_step if s["kept"]]
        assert len(scheduled) == len(kept) == 4 * 2
        order_zero_groups = sum(s["order"] == 0 for s in scheduled) / 2
        row = metrics[step]
        assert 0.0 <= row["dynamic_sampling/dropped_fraction"] <= 1.0
        assert row["dynamic_sampling/dropped_fraction"] == order_zero_groups / 4
        # Every scheduled group with varying rewards stays; a replacement always has them; only the
        # bound lets a zero-signal group into the update, and then it is a scheduled one.
        assert all(s["kept"] for s in scheduled if s["order"] == 1)
        assert all(s["order"] == 1 for s in kept if s["round"] > 0)
        zero_kept = sum(s["order"] == 0 for s in kept) / 2
        assert row["dynamic_sampling/zero_signal_kept_fraction"] == zero_kept / 4
        assert (row["dynamic_sampling/rounds"] > 0) == (order_zero_groups > 0)
