"""`tomrl reward score` end to end on real files: scores, odd strings, bad input, atomic output."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tomrl.cli import main


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def _read_jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


ODD_COMPLETIONS = [
    "",
    "x" * 1_000_000,
    "\x00\x01\x07\x1b[31m\x7f",
    "\ud800 lone surrogate \udfff",
    "\u202e\u200b\ufeff 🙂 ∑ 中文 \U0001f9e0",
    "<answer>" * 1000,
    "</answer>" + "<answer>" * 50_000,
]


def test_scores_rows_and_keeps_their_fields(tmp_path, capsys):
    source, out = tmp_path / "completions.jsonl", tmp_path / "scored.jsonl"
    _write_jsonl(
        source,
        [
            {"id": "a", "completion": "Ben left.</think><answer>red_box</answer>", "answer": "red_box"},
            {"id": "b", "completion": "r</think><answer>toolbox</answer>", "answer": "box"},
            {"id": "c", "completion": [{"role": "assistant", "content": "r</think><answer>box</answer>!"}], "answer": "box"},
        ],
    )
    assert main(["reward", "score", "--reward", "strict", "--input", str(source), "--out", str(out)]) == 0
    rows = _read_jsonl(out)
    assert [r["id"] for r in rows] == ["a", "b", "c"]
    assert [r["score"] for r in rows] == [3.0, -1.0, -3.0]
    assert [r["format_ok"] for r in rows] == [True, True, False]
    assert [r["correct"] for r in rows] == [True, False, False]
    assert [r["extracted"] for r in rows] == ["red_box", "toolbox", None]
    printed = capsys.readouterr().out
    assert "3 rows" in printed and "(n=3)" in printed and "%" in printed

    assert main(["reward", "score", "--reward", "paper", "--input", str(source), "--out", str(out)]) == 0
    assert [r["score"] for r in _read_jsonl(out)] == [3.0, 3.0, 3.0]  # suffix match, text after </answer> allowed


def test_any_string_scores_as_a_format_failure(tmp_path):
    source, out = tmp_path / "odd.jsonl", tmp_path / "odd_scored.jsonl"
    _write_jsonl(source, [{"completion": c, "answer": "box"} for c in ODD_COMPLETIONS])
    for reward in ("strict", "paper", "paper_b"):
        assert main(["reward", "score", "--reward", reward, "--input", str(source), "--out", str(out)]) == 0
        rows = _read_jsonl(out)
        assert len(rows) == len(ODD_COMPLETIONS)
        assert all(r["format_ok"] is False and r["correct"] is False for r in rows)
        assert rows[3]["completion"] == ODD_COMPLETIONS[3]  # lone surrogates survive the round trip


def test_prefill_option(tmp_path):
    source, out = tmp_path / "cot.jsonl", tmp_path / "cot_scored.jsonl"
    _write_jsonl(source, [{"completion": "Ben left. <answer>box</answer>", "answer": "box"}])
    assert main(["reward", "score", "--reward", "strict", "--prefill", "", "--input", str(source), "--out", str(out)]) == 0
    assert _read_jsonl(out)[0]["score"] == 3.0
    assert main(["reward", "score", "--reward", "strict", "--input", str(source), "--out", str(out)]) == 0
    assert _read_jsonl(out)[0]["score"] == -3.0


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"answer": "box"}', "field 'completion': missing"),
        ('{"completion": 3, "answer": "box"}', "field 'completion': expected a string"),
        ('{"completion": "x"}', "field 'answer': missing"),
        ('{"completion": "x", "answer": null}', "field 'answer': expected a string"),
        ('["not", "an", "object"]', "expected a JSON object"),
        ('{"completion": "x", "answer": "box"', "invalid JSON"),
    ],
)
def test_bad_rows_exit_2_naming_file_line_and_field(tmp_path, capsys, line, message):
    source, out = tmp_path / "bad.jsonl", tmp_path / "out.jsonl"
    source.write_text('{"completion": "r</think><answer>box</answer>", "answer": "box"}\n' + line + "\n", encoding="utf-8")
    assert main(["reward", "score", "--reward", "strict", "--input", str(source), "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert f"{source}:2" in error and message in error
    assert not out.exists()  # nothing half-written


def test_fidelity_from_the_command_line(tmp_path):
    story = "1 Anna and Ben entered the kitchen.\n2 The apple is in the red_box.\n3 Ben exited the kitchen.\n4 Anna moved the apple to the blue_box.\n"
    source, out = tmp_path / "traces.jsonl", tmp_path / "traces_scored.jsonl"
    _write_jsonl(
        source,
        [
            {"completion": "Ben thinks the apple is in the red_box.</think><answer>red_box</answer>", "answer": "red_box", "story": story, "source": "tomrl-hitom"},
            {"completion": "Ben thinks the apple is in the blue_box.</think><answer>blue_box</answer>", "answer": "red_box", "story": story, "source": "tomrl-hitom"},
            {"completion": "x", "answer": "a", "story": "story", "source": "opentom"},
        ],
    )
    assert main(["reward", "score", "--reward", "fidelity", "--input", str(source), "--out", str(out)]) == 0
    rows = _read_jsonl(out)
    assert [r["score"] for r in rows] == [1.0, -1.0, None]
    assert rows[0]["components"]["checkable"] == 1


def test_installed_console_script(tmp_path):
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_jsonl(source, [{"completion": "r</think><answer>box</answer>", "answer": "box"}])
    result = subprocess.run(
        [sys.executable, "-m", "tomrl", "reward", "score", "--reward", "paper_b", "--input", str(source), "--out", str(out)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert _read_jsonl(out)[0]["score"] == pytest.approx(1.1)
