"""Each detector on constructed data where it must fire and where it must not."""

from __future__ import annotations

import math
import random

import pytest

from tomrl.analysis.detectors import (
    FIRED,
    INCONCLUSIVE,
    NOT_ENOUGH_DATA,
    NOT_FIRED,
    BeliefCount,
    StepShare,
    detect_entropy_collapse,
    detect_id_ood_divergence,
    detect_inverted_difficulty,
    detect_negative_transfer,
    detect_reasoning_collapse,
)
from tomrl.analysis.significance import from_counts

STEPS = list(range(0, 400, 4))  # 100 logged steps


def collapsing_length(rng):
    # Paper A's ≤3B models: length falls steeply early in training, then stays low.
    return [380 * math.exp(-s / 80) + 45 + rng.gauss(0, 12) for s in STEPS]


def rising_reward(rng):
    return [-2.0 + 4.0 * (1 - math.exp(-s / 120)) + rng.gauss(0, 0.25) for s in STEPS]


def belief_counts(share_early, share_late, traces=16):
    counts = []
    for s in STEPS[::5]:
        share = share_early + (share_late - share_early) * s / STEPS[-1]
        counts.append(BeliefCount(s, round(share * traces), traces))
    return counts


# ------------------------------------------------------------------ reasoning collapse


def test_collapse_fires_when_length_falls_reward_rises_and_beliefs_vanish():
    rng = random.Random(0)
    result = detect_reasoning_collapse(STEPS, rising_reward(rng), collapsing_length(rng), belief_counts(0.9, 0.1),
                                       subject="run A")
    assert result.fired and result.verdict == FIRED
    assert result.data["length_relative_change"] < -0.5
    assert result.data["belief_change"]["high"] < 0
    assert "share of traces stating a belief" in dict(result.evidence)
    assert result.subject == "run A" and "collapse" in result.explanation.lower()


def test_collapse_fires_without_traces_and_says_beliefs_are_unchecked():
    rng = random.Random(1)
    result = detect_reasoning_collapse(STEPS, rising_reward(rng), collapsing_length(rng), None)
    assert result.fired
    assert "unchecked" in result.explanation
    assert dict(result.evidence)["share of traces stating a belief"].startswith("not measured: no reasoning traces")


def test_collapse_not_fired_when_shorter_traces_still_state_beliefs():
    rng = random.Random(2)
    result = detect_reasoning_collapse(STEPS, rising_reward(rng), collapsing_length(rng), belief_counts(0.85, 0.85))
    assert not result.fired and result.verdict == "shorter, still reasoning"


def test_collapse_not_fired_when_length_holds_while_reward_rises():
    # Paper A's 7B models keep their response length.
    rng = random.Random(3)
    steady = [420 + rng.gauss(0, 25) for _ in STEPS]
    result = detect_reasoning_collapse(STEPS, rising_reward(rng), steady)
    assert not result.fired and result.verdict == NOT_FIRED


def test_collapse_not_fired_when_length_grows():
    rng = random.Random(4)
    growing = [200 + 0.5 * s + rng.gauss(0, 20) for s in STEPS]
    assert not detect_reasoning_collapse(STEPS, rising_reward(rng), growing).fired


def test_collapse_not_fired_when_reward_does_not_rise():
    rng = random.Random(5)
    flat_reward = [-0.5 + rng.gauss(0, 0.3) for _ in STEPS]
    result = detect_reasoning_collapse(STEPS, flat_reward, collapsing_length(rng))
    assert not result.fired and "did not rise" in result.explanation


def test_collapse_needs_a_drop_of_practical_size():
    rng = random.Random(6)
    slight = [300 - 0.08 * s + rng.gauss(0, 3) for s in STEPS]  # −10 %, yet significant
    result = detect_reasoning_collapse(STEPS, rising_reward(rng), slight, min_relative_drop=0.2)
    assert result.data["length_change"]["high"] < 0
    assert not result.fired and "less than the 20 %" in result.explanation


def test_collapse_not_fired_on_trendless_autocorrelated_noise():
    # Random drifts of length and reward (AR(1), φ = 0.9) must not read as collapse.
    fired = 0
    for seed in range(40):
        rng = random.Random(100 + seed)
        length, reward, a, b = [], [], 0.0, 0.0
        for _ in STEPS:
            a, b = 0.9 * a + rng.gauss(0, 1), 0.9 * b + rng.gauss(0, 1)
            length.append(300 + 25 * a)
            reward.append(0.3 * b)
        fired += detect_reasoning_collapse(STEPS, reward, length).fired
    assert fired <= 1


def test_collapse_reports_not_enough_data_and_skips_missing_values():
    result = detect_reasoning_collapse([0, 1, 2], [0.0, 1.0, 2.0], [300.0, 200.0, 100.0])
    assert result.verdict == NOT_ENOUGH_DATA and not result.fired
    rng = random.Random(7)
    reward = rising_reward(rng)
    length = collapsing_length(rng)
    reward[3] = None
    length[10] = float("nan")
    assert detect_reasoning_collapse(STEPS, reward, length).data["steps"] == len(STEPS) - 2
    with pytest.raises(ValueError):
        detect_reasoning_collapse(STEPS, reward[:-1], length)


# ------------------------------------------------------------------ inverted difficulty


def by_order(percentages, n=120):
    return {order: from_counts(round(p * n / 100), n) for order, p in enumerate(percentages)}


def test_inverted_difficulty_fires_on_paper_a_05b_per_order_accuracy():
    result = detect_inverted_difficulty(by_order([52, 68, 67, 85, 83]), subject="0.5B + RL, Hi-ToM")
    assert result.fired and result.data["trend_significant"]
    assert result.data["trend"]["z"] > 5


def test_inverted_difficulty_fires_on_the_first_location_shortcut():
    # The no-ToM "first stated location" heuristic in Hi-ToM 600 (MISSION.md).
    assert detect_inverted_difficulty(by_order([15.8, 30.8, 34.2, 43.3, 43.3])).fired


def test_inverted_difficulty_fires_on_one_order_far_above_order_one_without_a_trend():
    accs = by_order([90, 40, 85, 45, 40], n=200)
    result = detect_inverted_difficulty(accs)
    assert result.fired and not result.data["trend_significant"]
    assert any(c["lower"] == 1 and c["higher"] == 2 and c["difference"]["low"] > 0 for c in result.data["comparisons"])


def test_inverted_difficulty_not_fired_on_normal_difficulty():
    assert not detect_inverted_difficulty(by_order([95, 70, 55, 40, 30])).fired


def test_inverted_difficulty_not_fired_on_flat_accuracy():
    result = detect_inverted_difficulty(by_order([50, 50, 50, 50, 50]))
    assert not result.fired and result.verdict == NOT_FIRED


def test_inverted_difficulty_not_fired_when_intervals_cannot_tell():
    # A rising point estimate on 10 questions per order is not evidence.
    result = detect_inverted_difficulty(by_order([40, 50, 60, 70], n=10))
    assert not result.fired
    assert result.data["tests"] == 1 + 6


def test_inverted_difficulty_is_inconclusive_on_paper_a_curve_at_twenty_per_order():
    # Paper A's own inverted curve cannot be seen with 20 questions per order: "no inversion" would be a false claim.
    result = detect_inverted_difficulty(by_order([52, 68, 67, 85, 83], n=20))
    assert not result.fired
    assert result.verdict.startswith(INCONCLUSIVE) and "n = 20" in result.verdict
    assert result.data["minimal_detectable_effect"] > 0.31
    assert detect_inverted_difficulty(by_order([52, 68, 67, 85, 83], n=100)).fired  # with enough questions it fires


def test_inverted_difficulty_needs_two_orders():
    assert detect_inverted_difficulty({2: from_counts(5, 10), 3: from_counts(0, 0)}).verdict == NOT_ENOUGH_DATA


# ------------------------------------------------------------------ negative transfer


def test_negative_transfer_fires_on_paper_b_order4_only_training():
    base = {"hitom order 1": from_counts(198, 300), "hitom order 4": from_counts(90, 300)}
    trained = {"O4": {"hitom order 1": from_counts(105, 300), "hitom order 4": from_counts(240, 300)}}
    result = detect_negative_transfer(base, trained, {"O4": ["hitom order 4"]})
    assert result.fired
    drops = [c for c in result.data["comparisons"] if c["significant_drop"]]
    assert [(c["mixture"], c["task"]) for c in drops] == [("O4", "hitom order 1")]
    assert result.data["tests"] == 1  # the trained-on task is not a transfer comparison


def test_negative_transfer_ignores_drops_on_trained_tasks_and_small_differences():
    base = {"tomi": from_counts(150, 300), "hitom": from_counts(150, 300), "opentom": from_counts(120, 300)}
    trained = {
        "tomi-only": {"tomi": from_counts(60, 300), "hitom": from_counts(141, 300), "opentom": from_counts(125, 300)},
        "hitom-only": {"tomi": from_counts(155, 300), "hitom": from_counts(250, 300)},
    }
    result = detect_negative_transfer(base, trained, {"tomi-only": {"tomi"}, "hitom-only": {"hitom"}})
    assert not result.fired and result.verdict == NOT_FIRED
    assert result.data["tests"] == 3
    assert "largest drop (not significant)" in dict(result.evidence)


def test_negative_transfer_compares_all_tasks_when_the_mixture_is_unknown():
    base = {"tomi": from_counts(200, 300)}
    trained = {"mystery": {"tomi": from_counts(100, 300)}}
    result = detect_negative_transfer(base, trained, None)
    assert result.fired and result.data["unknown_training_tasks"] == ["mystery"]


def test_negative_transfer_is_vacuous_when_the_base_scores_zero():
    base = {"tomi": from_counts(0, 300), "hitom": from_counts(0, 300)}
    trained = {"m": {"tomi": from_counts(100, 300), "hitom": from_counts(0, 300)}}
    result = detect_negative_transfer(base, trained, {"m": []})
    assert not result.fired and result.verdict.startswith(INCONCLUSIVE) and "0 %" in result.verdict


def test_negative_transfer_is_inconclusive_on_small_samples():
    result = detect_negative_transfer({"tomi": from_counts(5, 10)}, {"m": {"tomi": from_counts(4, 10)}}, {"m": []})
    assert not result.fired and result.verdict.startswith(INCONCLUSIVE)


def test_negative_transfer_without_shared_tasks_is_not_enough_data():
    result = detect_negative_transfer({"tomi": from_counts(5, 10)}, {"m": {"hitom": from_counts(5, 10)}})
    assert result.verdict == NOT_ENOUGH_DATA and not result.fired


# ------------------------------------------------------------------ ID/OOD divergence


def series(percentages, n=300):
    return [from_counts(round(p * n / 100), n) for p in percentages]


def test_divergence_fires_when_id_rises_and_ood_stays_flat():
    result = detect_id_ood_divergence([0, 100, 200, 300], series([45, 65, 78, 86]), series([40, 41, 39, 38]))
    assert result.fired and result.verdict == FIRED
    assert result.data["gap_change"]["low"] > 0


def test_divergence_not_fired_when_both_rise():
    result = detect_id_ood_divergence([0, 300], series([45, 86]), series([40, 70]))
    assert not result.fired and result.verdict == "partial transfer"


def test_divergence_not_fired_when_id_does_not_rise():
    result = detect_id_ood_divergence([0, 150, 300], series([50, 52, 51]), series([40, 30, 25]))
    assert not result.fired and result.verdict == NOT_FIRED


def test_divergence_not_fired_when_held_out_set_is_too_small_to_tell():
    result = detect_id_ood_divergence([0, 300], series([45, 80]), series([40, 50], n=10))
    assert not result.fired and "did not widen significantly" in result.explanation


def test_divergence_needs_two_evaluations():
    result = detect_id_ood_divergence([0, 10], series([45, 80]), [from_counts(5, 10), from_counts(0, 0)])
    assert result.verdict == NOT_ENOUGH_DATA


def test_collapse_with_too_few_traces_leaves_the_question_open():
    rng = random.Random(8)
    few = [BeliefCount(0, 3, 4), BeliefCount(200, 3, 4), BeliefCount(396, 2, 4)]
    result = detect_reasoning_collapse(STEPS, rising_reward(rng), collapsing_length(rng), few)
    assert not result.fired and result.verdict == "shorter, beliefs unclear"


# ------------------------------------------------------------------ entropy collapse


def test_entropy_collapse_fires_on_a_planted_fall():
    # The usual shape: entropy drops fast early in RL, then stays near zero.
    rng = random.Random(5)
    entropy = [0.9 * math.exp(-s / 60) + 0.05 + rng.gauss(0, 0.03) for s in STEPS]
    result = detect_entropy_collapse(STEPS, entropy, subject="run E")
    assert result.fired and result.verdict == FIRED
    assert result.data["entropy_relative_change"] < -0.5
    assert result.data["entropy_change"]["high"] < 0
    assert "mean token entropy" in dict(result.evidence) and result.subject == "run E"


def test_entropy_collapse_not_fired_on_flat_entropy():
    rng = random.Random(6)
    flat = [0.8 + rng.gauss(0, 0.03) for _ in STEPS]
    result = detect_entropy_collapse(STEPS, flat)
    assert not result.fired and result.verdict == NOT_FIRED


def test_entropy_collapse_needs_a_fall_of_the_threshold_size():
    rng = random.Random(7)
    slow = [0.8 - 0.2 * s / STEPS[-1] + rng.gauss(0, 0.01) for s in STEPS]  # thirds' means −18 %: significant, not collapse
    result = detect_entropy_collapse(STEPS, slow)
    assert result.data["entropy_change"]["high"] < 0
    assert not result.fired and result.verdict == NOT_FIRED and "less than" in result.explanation
    assert detect_entropy_collapse(STEPS, slow, min_relative_drop=0.15).fired


def test_entropy_collapse_on_two_steps_is_not_enough_data():
    result = detect_entropy_collapse([1, 2], [0.9, 0.1])
    assert not result.fired and result.verdict == NOT_ENOUGH_DATA
    assert "Only 2 training steps" in result.explanation
    assert detect_entropy_collapse(STEPS[:12], [None] * 6 + [0.5] * 6).verdict == NOT_ENOUGH_DATA  # missing values skipped


def test_entropy_collapse_is_inconclusive_when_the_noise_hides_a_large_fall():
    noisy = [0.8 + 0.4 * (-1) ** i for i in range(12)]  # no trend, but steps apart by the size of the level
    result = detect_entropy_collapse(list(range(12)), noisy)
    assert not result.fired and result.verdict.startswith(INCONCLUSIVE)
    assert result.data["largest_fall_allowed"] >= 0.5


def test_collapse_evidence_lists_the_context_shares_without_changing_the_verdict():
    rng = random.Random(9)
    reward, length = rising_reward(rng), collapsing_length(rng)
    mention = [StepShare(s, 15 if s < 200 else 3, 16) for s in STEPS[::5]]
    plain = detect_reasoning_collapse(STEPS, reward, length, belief_counts(0.9, 0.1))
    result = detect_reasoning_collapse(STEPS, reward, length, belief_counts(0.9, 0.1),
                                       context_shares={"share naming every asked agent": mention})
    assert result.verdict == plain.verdict == FIRED
    line = dict(result.evidence)["share naming every asked agent"]
    assert line.startswith("93.8 %") and "change -" in line
    numbers = result.data["context_shares"]["share naming every asked agent"]
    assert numbers["change"]["high"] < 0 and len(numbers["by_step"]) == len(mention)
    one_step = detect_reasoning_collapse(STEPS, reward, length, context_shares={"x": [StepShare(0, 1, 2)]})
    assert dict(one_step.evidence)["x"].startswith("not measured")
