"""tomrl data audit end to end: files in, Markdown on stdout, JSON written."""

from __future__ import annotations

import json

from tomrl.cli import main
from tomrl.schema import Example, write_examples

STORY = "Al and Bo entered the den.\nThe pen is in the red_box.\nBo exited the den.\nAl moved the pen to the blue_bag."


def ex(i: str, story: str, question: str, answer: str, order: int) -> Example:
    return Example(id=i, source="toy", split="test", story=story, question=question, answer=answer, order=order,
                   question_type="q", deception=None, story_length=4, story_id=i)


def test_audit_command(tmp_path, capsys):
    train = tmp_path / "train.jsonl"
    test = tmp_path / "test.jsonl"
    write_examples(train, [ex("t0", STORY, "Where is the pen really?", "blue_bag", 0)])
    write_examples(test, [
        ex("a", STORY, "Where does Bo think the pen is?", "red_box", 1),  # leaked story
        ex("b", STORY.replace("pen", "cup"), "Where does Bo think the cup is?", "red_box", 1),
        ex("c", STORY.replace("pen", "hat"), "Where is the hat really?", "blue_bag", 0),
    ])
    out_json = tmp_path / "audit.json"
    out_md = tmp_path / "audit.md"
    assert main(["data", "audit", "--train", str(train), "--test", str(test), "--json", str(out_json), "--markdown", str(out_md)]) == 0
    markdown = capsys.readouterr().out
    assert "### Leakage" in markdown and "| toy | 1 | 2 | 1 (50.0 %)" in markdown
    assert out_md.read_text() == markdown.rstrip("\n") or out_md.read_text().strip() == markdown.strip()
    report = json.loads(out_json.read_text())
    (entry,) = report["tests"]
    assert entry["leakage"]["leaked_ids"] == ["a"]
    shortcuts = {row["order"]: row for row in entry["shortcuts"]}
    exit_order1 = shortcuts[1]["heuristics"]["exit_location"]
    assert (exit_order1["n"], exit_order1["k"]) == (2, 2)  # Bo left before the move
    assert shortcuts[0]["heuristics"]["true_location"]["k"] == 1
    assert {"low", "high", "n"} <= set(exit_order1)


def test_audit_bad_input(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n')
    assert main(["data", "audit", "--test", str(bad)]) == 2
    assert "bad.jsonl:1: field" in capsys.readouterr().err
    assert main(["data", "audit", "--test", "no_such_thing"]) == 2


def test_audit_prints_the_learned_baseline(tmp_path, capsys):
    from tomrl.generators import generate
    from tomrl.generators.config import GenerateConfig

    def plain(seed: int):
        return generate(GenerateConfig(benchmark="hitom", n=60, seed=seed, orders=[2], agents=4, lengths=[1], deception=[False],
                                       distractor_prob=0.0, split_fractions={"test": 1.0}))

    train, test = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_examples(train, plain(1))
    write_examples(test, plain(2))
    out_json = tmp_path / "audit.json"
    assert main(["data", "audit", "--train", str(train), "--test", str(test), "--json", str(out_json)]) == 0
    markdown = capsys.readouterr().out
    assert "### Learned agent-blind baseline" in markdown
    assert "| cross-fitted by story | 2 |" in markdown and "| fitted on train | 2 |" in markdown
    (entry,) = json.loads(out_json.read_text())["tests"]
    by_mode = entry["learned_baseline"]["tomrl-hitom"]
    assert set(by_mode) == {"cross-fitted by story", "fitted on train"}
    assert by_mode["fitted on train"]["2"]["n"] == 60 and by_mode["fitted on train"]["2"]["rule"].endswith("fitted on train")
