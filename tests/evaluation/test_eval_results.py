"""Rates with intervals, per-group summaries and throughput, checked against hand-computed values."""

from __future__ import annotations

import math

import pytest

from tomrl.evaluation.results import format_rate, rate, summarize_benchmark, throughput


def test_wilson_rate_by_hand():
    # k=7, n=20: p=0.35, z=1.96 -> centre (0.35 + 1.96²/40) / (1 + 1.96²/20), half-width as below.
    z = 1.959963984540054
    p, n = 0.35, 20
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    result = rate([True] * 7 + [False] * 13)
    assert (result["n"], result["k"], result["value"], result["method"]) == (20, 7, 0.35, "wilson")
    assert result["low"] == pytest.approx(centre - half) and result["high"] == pytest.approx(centre + half)
    assert result["low"] == pytest.approx(0.1812, abs=1e-4) and result["high"] == pytest.approx(0.5671, abs=1e-4)


def test_bootstrap_rate():
    result = rate([True] * 30 + [False] * 70, interval="bootstrap", resamples=500, seed=1)
    assert result["method"] == "bootstrap-500" and result["value"] == 0.3
    assert 0.19 < result["low"] < 0.3 < result["high"] < 0.41
    assert rate([True] * 30 + [False] * 70, interval="bootstrap", resamples=500, seed=1) == result  # seeded


def test_edge_rates():
    assert rate([])["n"] == 0
    assert rate([True, True])["high"] == 1.0 and rate([False])["low"] == 0.0
    with pytest.raises(ValueError):
        rate([True], interval="normal")


def _row(order, qtype, correct, paper_correct, format_ok, tokens=10, reason="eos"):
    return {"order": order, "question_type": qtype, "correct": correct, "paper_correct": paper_correct, "format_ok": format_ok,
            "paper_format_ok": True, "tokens": tokens, "finish_reason": reason}


def test_summarize_by_order_and_type():
    rows = [_row(0, "reality", True, True, True, 4), _row(0, "reality", False, True, False, 6), _row(2, "second", False, False, True, 20, "length")]
    summary = summarize_benchmark(rows, ("order", "question_type"))
    overall = summary["overall"]
    assert overall["n"] == 3 and overall["strict"]["accuracy"]["k"] == 1 and overall["paper_eval"]["accuracy"]["k"] == 2
    assert overall["strict"]["format_failure"]["k"] == 1 and overall["paper_eval"]["format_failure"]["k"] == 0
    assert overall["mean_response_tokens"] == 10 and overall["finish_reasons"] == {"eos": 2, "length": 1}
    assert list(summary["by_order"]) == ["0", "2"] and summary["by_order"]["0"]["strict"]["accuracy"]["value"] == 0.5
    assert set(summary["by_question_type"]) == {"reality", "second"}


def test_groups_sort_numerically_and_name_missing_values():
    rows = [_row(o, "t", True, True, True) for o in (10, 2, None, 1)]
    assert list(summarize_benchmark(rows, ("order",))["by_order"]) == ["1", "2", "10", "none"]


def test_throughput_and_format():
    assert throughput([{"tokens": 300, "seconds": 2.0, "completions": 3}, {"tokens": 100, "seconds": 2.0, "completions": 1}])["tokens_per_s"] == 100.0
    assert throughput([])["tokens_per_s"] is None
    assert format_rate(rate([True] * 7 + [False] * 13)) == "35.0 % [18.1, 56.7] (n=20)"
