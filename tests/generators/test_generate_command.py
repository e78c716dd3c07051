"""`tomrl data generate` and `tomrl data verify` as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tomrl.cli import main
from tomrl.schema import read_examples, write_examples

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "generate"


def test_generate_then_verify_a_generated_file(tmp_path, capsys):
    out = tmp_path / "easy.jsonl"
    code = main(["data", "generate", "hitom", "--n", "40", "--orders", "0,1", "--lengths", "1", "--deception", "off", "--split-fractions", "train=0.75,test=0.25", "--out", str(out), "seed=4"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "wrote 40 hitom questions about 40 stories" in printed and "(seed 4)" in printed
    examples = read_examples(out)
    assert {e.order for e in examples} == {0, 1} and {e.split for e in examples} == {"train", "test"}
    assert main(["data", "verify", str(out), "--json", str(tmp_path / "report.json")]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["disagreements"] == [] and report["by_type"][-1]["n"] == 40

    broken = tmp_path / "broken.jsonl"
    first = examples[0]
    write_examples(broken, [first.replace(answer=next(c for c in first.choices if c != first.answer))] + examples[1:])
    assert main(["data", "verify", str(broken)]) == 1


def test_generate_from_a_shipped_config_with_exclusion(tmp_path):
    train = tmp_path / "train.jsonl"
    test = tmp_path / "test.jsonl"
    assert main(["data", "generate", "hitom", "--config", str(CONFIGS / "hitom_paper_a_train.yaml"), "--out", str(train), "n=60", "stories=20"]) == 0
    assert main(["data", "generate", "hitom", "--config", str(CONFIGS / "hitom_heldout_order4.yaml"), "--exclude", str(train), "--out", str(test), "n=30", "seed=0"]) == 0
    train_rows, test_rows = read_examples(train), read_examples(test)
    assert {e.order for e in train_rows} == {0, 1, 2, 3} and {e.order for e in test_rows} == {4}
    assert {e.split for e in test_rows} == {"test"}
    assert not {e.story_id for e in train_rows} & {e.story_id for e in test_rows}


def test_user_errors_exit_2(tmp_path, capsys):
    assert main(["data", "generate", "hitom", "--n", "5", "--out", str(tmp_path / "x.jsonl"), "sed=1"]) == 2
    assert "unknown key 'sed'" in capsys.readouterr().err
    assert main(["data", "generate", "hitom", "--n", "5", "--split", "test", "--split-fractions", "train=1", "--out", str(tmp_path / "x.jsonl")]) == 2
    assert main(["data", "verify", "hitom", "--data", str(tmp_path / "nowhere")]) == 2
    assert main(["data", "verify", str(tmp_path / "missing.jsonl")]) == 2


def test_verify_hitom_and_tomi_print_the_agreement(shared_data, capsys, tmp_path):
    if not (shared_data / "hitom" / "hitom_data.jsonl").is_file():
        pytest.skip("Hi-ToM data not found")
    assert main(["data", "verify", "hitom", "--data", str(shared_data)]) == 0
    printed = capsys.readouterr().out
    assert "Hi-ToM CoT-prompt agreement: 583/600" in printed and "sample_id 857" in printed
    assert main(["data", "verify", "tomi", "--split", "test", "--data", str(shared_data), "--json", str(tmp_path / "t.json")]) == 0
    printed = capsys.readouterr().out
    assert "second_order" in printed and "A: third agent enters the room" in printed
    assert json.loads((tmp_path / "t.json").read_text())["by_question_type"][0]["question_type"] == "first_order"
