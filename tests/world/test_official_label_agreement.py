"""The oracle re-derives the official Hi-ToM and ToMi labels (skipped where ../shared/data is absent)."""

from __future__ import annotations

import pytest

from tomrl.generators.verify import HITOM_COTP_MIN_AGREEMENT, verify_hitom, verify_tomi

# The CoT-prompt rows the oracle disputes (see /work/shared/data/hitom/PROVENANCE.md).
HITOM_COTP_DISPUTED = [241, 242, 261, 262, 281, 285, 292, 296, 742, 758, 762, 774, 778, 782, 794, 857, 881]


@pytest.fixture(scope="module")
def hitom_path(shared_data):
    path = shared_data / "hitom" / "hitom_data.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    return path


def test_hitom_cot_prompt_labels_583_of_600_each_disagreement_explained(hitom_path):
    report = verify_hitom(hitom_path, "CoTP", "joint")
    assert report.n == 600
    assert report.agree >= HITOM_COTP_MIN_AGREEMENT
    assert sorted(d["sample_id"] for d in report.disagreements) == HITOM_COTP_DISPUTED
    assert all(d["reason"] for d in report.disagreements)
    orders = {row["order"]: row for row in report.by_order.rows()}
    assert orders["0"]["agree"] == 120 and orders["1"]["agree"] == 120


def test_hitom_vp_labels_follow_the_generator_code_rule_exactly(hitom_path):
    assert verify_hitom(hitom_path, "VP", "ordered", explain=False).agree == 600
    # and each label set needs its own rule
    assert verify_hitom(hitom_path, "VP", "joint", explain=False).agree < 500
    assert verify_hitom(hitom_path, "CoTP", "ordered", explain=False).agree < 500


def test_tomi_first_order_memory_reality_exact_and_second_order_noise_explained(shared_data):
    path = shared_data / "tomi" / "tomi_test.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    report = verify_tomi({"test": path})
    for question_type, n in (("first_order", 1998), ("memory", 999), ("reality", 999)):
        values = report.by_type.results[question_type]
        assert len(values) == n and all(values), question_type
    second = report.by_type.results["second_order"]
    assert len(second) == 1998 and sum(second) == 1998 - 464  # PROVENANCE: 464 disagreements in test
    assert report.second_order_explained()
    assert report.second_order_cases["none"]["agree"] == report.second_order_cases["none"]["n"]
