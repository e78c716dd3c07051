"""The registry, every card, the tomrl data load command, and the dataset cards in docs/datasets.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from tomrl.cli import main
from tomrl.config import ConfigError
from tomrl.loaders.registry import LOADERS, cards_markdown, is_evaluation_only, load, refuse_evaluation_only
from tomrl.schema import Example, read_examples

DOCS = Path(__file__).resolve().parents[2] / "docs" / "datasets.md"
EXPECTED = {"hitom", "tomi", "exploretom", "opentom", "fantom", "tomrl-paper-train", "tomrl-paper-hitom600", "tomrl-paper-hitom4",
            "tomrl-paper-tomi", "tomrl-paper-exploretom", "tomrl-paper-exploretom-infilled"}


def test_every_documented_loader_is_registered_with_a_full_card():
    assert EXPECTED <= set(LOADERS)
    for name, loader in LOADERS.items():
        card = loader.card
        assert card.source and card.license and card.known_problems, name
        if name != "jsonl":  # the generic loader of the user's own file has no upstream to document
            assert card.paper and card.files and (card.counts or card.how_to_obtain), name
    assert [n for n, loader in LOADERS.items() if loader.card.evaluation_only] == ["opentom"]


def test_evaluation_only_is_one_rule_on_the_row_or_its_source():
    row = Example("a", "hitom", "test", "Al entered the den.", "Where is Al?", "den", 0, "q", None, 1, "s")
    marked, from_opentom = row.replace(meta={"evaluation_only": True}), row.replace(source="opentom")
    assert [is_evaluation_only(e) for e in (row, marked, from_opentom)] == [False, True, True]
    assert not is_evaluation_only(row.replace(source="my-opentom-notes"))  # a name, not a substring
    refuse_evaluation_only([row], "training")
    with pytest.raises(ConfigError, match="'a' \\(opentom\\) is evaluation-only.*cannot go into training"):
        refuse_evaluation_only([row, from_opentom], "training")


def test_unknown_names_and_options_are_errors():
    with pytest.raises(ConfigError, match="did you mean 'hitom'"):
        load("hitmo")
    with pytest.raises(ConfigError, match="unknown option 'splt'"):
        load("tomi", splt="train")
    with pytest.raises(ConfigError, match="must be one of"):
        load("tomi", split="dev")


def test_docs_hold_the_current_cards():
    text = DOCS.read_text(encoding="utf-8")
    assert cards_markdown() in text, "docs/datasets.md is stale: regenerate its cards block with python -m tomrl.loaders.registry"


def test_load_command_writes_unified_jsonl(shared_data, tmp_path, capsys):
    out = tmp_path / "tomi_val.jsonl"
    assert main(["data", "load", "tomi", "split=validation", "oracle=false", "--out", str(out)]) == 0
    examples = read_examples(out)
    assert len(examples) == 5994 and {e.split for e in examples} == {"validation"}
    assert "5,994 examples" in capsys.readouterr().out


def test_load_command_errors(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TOMRL_DATA", str(tmp_path))
    assert main(["data", "load", "fantom", "--out", str(tmp_path / "f.jsonl")]) == 2
    assert "fantom.tar.gz" in capsys.readouterr().err
    assert not (tmp_path / "f.jsonl").exists()
    assert main(["data", "load", "--list"]) == 0
    assert "tomrl-paper-hitom4" in capsys.readouterr().out


def test_load_checks_answers_against_the_story(shared_data, tmp_path, capsys):
    """An original ToMi file whose row 2 names a place its story never mentions stops the load."""
    import json

    lines = (shared_data / "tomi" / "tomi_test.jsonl").read_text(encoding="utf-8").splitlines()[:3]
    row = json.loads(lines[1])
    row["answer"] = "purple_bathtub"
    lines[1] = json.dumps(row)
    bad = tmp_path / "tomi_test.jsonl"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert main(["data", "load", "tomi", "split=test", "oracle=false", "--path", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"data set 'tomi' ({bad}): example 'tomi-{row['id']}' (tomi): field 'answer': 'purple_bathtub' never occurs in the story" in err
    assert not out.exists()
    assert len(load("tomi", split="test", oracle=False)) == 5994  # the real file passes


def test_jsonl_loader_names_file_and_line_of_a_wrong_answer(tmp_path):
    from tomrl.io import BadInputError
    from tomrl.schema import Example, write_examples

    story = "Al entered the den.\nThe pen is in the red_box."
    write_examples(tmp_path / "mine.jsonl", [Example("a", "tomrl-tomi", "test", story, "Where is the pen?", "red_box", 0, "q", None, 2, "s"),
                                             Example("b", "tomrl-tomi", "test", story, "Where is the pen?", "green_bag", 0, "q", None, 2, "s")])
    with pytest.raises(BadInputError, match=r"mine\.jsonl:2: field 'answer': 'green_bag' never occurs in the story"):
        load("jsonl", tmp_path / "mine.jsonl")
