"""The Markdown table in Paper A's Table 1 layout."""

from __future__ import annotations

import pytest

from tomrl.evaluation.results import summarize_benchmark
from tomrl.evaluation.table import COLUMNS, PAPER_A_TABLE1, markdown_table, paper_row_for, summary_markdown


def _results(model, paper_row=None):
    rows = [{"order": 0, "question_type": "q", "correct": c, "paper_correct": c or i == 1, "format_ok": True, "paper_format_ok": True,
             "tokens": 5, "finish_reason": "stop"} for i, c in enumerate([True, False, False, True])]
    bench = {"paper_column": "ToMi", "n_selected": 4, "complete": True, "tokens_per_s": 123.0, **summarize_benchmark(rows)}
    return {"model": model, "paper_row": paper_row, "benchmarks": {"tomi": bench}, "seed": 0, "engine": {"engine": "hf"},
            "sampling": {"temperature": 0.6, "top_p": 0.95, "max_new_tokens": 64}, "config": {"limit": 4}, "skipped": {}}


def test_paper_numbers_are_mission_table_1():
    assert PAPER_A_TABLE1["Qwen2.5-0.5B-Instruct"] == (30.33, 23.83, 29.38, 60.51, 54.97)
    assert PAPER_A_TABLE1["7B-1M + RL"] == (84.50, 94.50, 81.08, 92.31, 77.20)
    assert len(PAPER_A_TABLE1) == 9 and COLUMNS == ("Hi-ToM", "4th-order", "ToMi", "ExploreToM", "ExploreToM infilled")


def test_paper_row_matching():
    assert paper_row_for("Qwen/Qwen2.5-0.5B-Instruct") == "Qwen2.5-0.5B-Instruct"
    assert paper_row_for("/models/qwen2.5-7b-instruct/") == "Qwen2.5-7B-Instruct"
    assert paper_row_for("smollm2-135m") is None
    assert paper_row_for("./ckpt/step-800", override="0.5B + RL") == "0.5B + RL"
    with pytest.raises(ValueError):
        paper_row_for("x", override="9B + RL")


def test_table_layout_with_intervals_and_paper_row():
    table = markdown_table([_results("Qwen/Qwen2.5-0.5B-Instruct", "Qwen2.5-0.5B-Instruct")])
    lines = table.splitlines()
    assert lines[0] == "| Model | Hi-ToM | 4th-order | ToMi | ExploreToM | ExploreToM infilled |"
    paper_scoring, strict, paper = lines[2], lines[3], lines[4]
    # ToMi: paper scoring 3/4 = 75 %, strict 2/4 = 50 %, each with its Wilson interval and n.
    assert "(tomrl, paper scoring) | – | – | 75.0 [30.1, 95.4] n=4 | – | – |" in paper_scoring
    assert "(tomrl, strict) | – | – | 50.0 [15.0, 85.0] n=4 |" in strict
    assert paper == "| Qwen2.5-0.5B-Instruct (Paper A) | 30.33 | 23.83 | 29.38 | 60.51 | 54.97 |"
    assert "limit 4 per benchmark" in table


def test_table_without_match_and_all_rows():
    table = markdown_table([_results("smollm2-135m")], all_paper_rows=True)
    assert "(Paper A)" in table and table.count("(Paper A)") == 9
    assert "smollm2-135m (tomrl, strict)" in table


def test_summary_breakdown():
    text = summary_markdown(_results("m"))
    assert "| tomi | 4 | 75.0 [30.1, 95.4] | 50.0 [15.0, 85.0] |" in text
    assert "### tomi by order" in text
