"""The partial-ToM audit on hand-written stories (answers computed by hand), in the report and the CLI."""

from __future__ import annotations

import json

import pytest

from tomrl.audit.partial import PartialToMResult, audit_question, nesting_required_ids, partial_tom
from tomrl.audit.report import PARTIAL_TOM_TITLE, audit, to_markdown
from tomrl.cli import main
from tomrl.schema import Example, write_examples
from tomrl.world.partial import PARTIAL_RULES

# Anna leaves chapter 1 before Ben; in chapter 2 Anna alone moves the apple again.
# Own beliefs: Anna blue_box, Ben green_box, Cleo green_box; (Anna, Ben) is red_box.
TWO_CHAPTERS = "\n".join([
    "1 Anna, Ben and Cleo entered the kitchen.",
    "2 The apple is in the red_box.",
    "3 Anna exited the kitchen.",
    "4 Cleo moved the apple to the green_box.",
    "5 Ben exited the kitchen.",
    "6 Cleo exited the kitchen.",
    "7 Anna entered the kitchen.",
    "8 Anna moved the apple to the blue_box.",
    "9 Anna exited the kitchen.",
])


def ex(i: str, question: str, answer: str, order: int, story: str = TWO_CHAPTERS, source: str = "toy", meta: dict | None = None) -> Example:
    return Example(id=i, source=source, split="test", story=story, question=question, answer=answer, order=order,
                   question_type=f"order_{order}", deception=False, story_length=2, story_id=f"s-{i}", meta=meta or {})


NESTED = ex("nested", "Where does Anna think Ben thinks the apple is?", "red_box", 2)  # nobody's own belief
PARTIAL = ex("partial", "Where does Ben think Cleo thinks the apple is?", "green_box", 2)  # both agents' own belief
NESTED3 = ex("nested3", "Where does Cleo think Anna thinks Ben thinks the apple is?", "red_box", 3)
FIRST = ex("first", "Where does Anna really think the apple is?", "blue_box", 1)  # order 1: not audited
UNPARSED_QUESTION = ex("odd", "Where does Anna think that Ben will look for the apple?", "red_box", 2)
UNPARSED_STORY = ex("odd-story", "Where does Anna think Ben thinks the apple is?", "red_box", 2,
                    story=TWO_CHAPTERS.replace("Cleo moved the apple", "Cleo carefully shifted the apple"))
NOT_LOCATION = ex("yes-no", "Does Anna think Ben knows where the apple is? Answer yes or no.", "no", 2)


def test_one_question_by_hand():
    q = audit_question(NESTED)
    assert q is not None
    assert q.chain == ("Anna", "Ben") and q.obj == "apple" and q.oracle_answer == "red_box"
    assert q.first_order == {"Anna": "blue_box", "Ben": "green_box"}
    assert q.rule_answers["left_first"] == "blue_box" and q.rule_answers["oldest_knowledge"] == "green_box"
    assert q.nesting_required and not q.partially_answerable and q.label_agrees
    assert q.chance == pytest.approx(1 / 3)  # the apple has been in three places
    assert audit_question(UNPARSED_QUESTION) is None and audit_question(UNPARSED_STORY) is None


def test_groups_by_source_and_order():
    results = partial_tom([NESTED, PARTIAL, NESTED3, FIRST, UNPARSED_QUESTION, UNPARSED_STORY, NOT_LOCATION])
    assert set(results) == {"toy"} and set(results["toy"]) == {2, 3}
    two = results["toy"][2]
    assert isinstance(two, PartialToMResult)
    assert (two.n, two.n_not_parsed, two.n_label_differs) == (2, 2, 0)
    assert (two.partially_answerable.k, two.partially_answerable.n) == (1, 2)
    assert (two.nesting_required.k, two.nesting_required.n) == (1, 2)
    # Every rule is wrong on NESTED; on PARTIAL both agents believe green_box, so every rule is right.
    assert {name: acc.k for name, acc in two.rules.items()} == {name: 1 for name in PARTIAL_RULES}
    assert two.best_rule == "first_named"  # ties: the earlier rule
    assert two.chance == pytest.approx((1 / 3 + 1 / 3) / 2)
    assert two.margin == pytest.approx(0.5 - 1 / 3) and two.flagged  # 16.7 points > 10
    three = results["toy"][3]
    assert (three.n, three.nesting_required.k, three.partially_answerable.k) == (1, 1, 0)
    assert three.best.k == 0 and three.margin < 0 and not three.flagged
    json.dumps({s: {o: r.to_dict() for o, r in by.items()} for s, by in results.items()})  # JSON-able


def test_nesting_required_ids_only_for_parsed_nested_location_questions():
    flags = nesting_required_ids([NESTED, PARTIAL, NESTED3, FIRST, UNPARSED_QUESTION, UNPARSED_STORY, NOT_LOCATION])
    assert flags == {"nested": True, "partial": False, "nested3": True}


def test_a_wrong_label_is_counted_and_scored_against_the_gold():
    wrong = ex("wrong", "Where does Anna think Ben thinks the apple is?", "green_box", 2)  # the oracle says red_box
    result = partial_tom([wrong])["toy"][2]
    assert result.n_label_differs == 1
    assert result.partially_answerable.k == 1  # Ben's own belief matches the (wrong) gold
    assert result.nesting_required.k == 1  # by the oracle's answer, nobody's own belief
    assert result.rules["last_named"].k == 1 and result.rules["first_named"].k == 0


def test_semantics_from_meta():
    # Anna moves the apple while Ben watches: under "ordered" semantics (A, B) is not updated.
    story = "\n".join([
        "1 Anna and Ben entered the hall.", "2 The apple is in the red_box.", "3 Anna moved the apple to the green_box.",
        "4 Ben exited the hall.", "5 Anna exited the hall.",
    ])
    question = "Where does Anna think Ben thinks the apple is?"
    joint = audit_question(ex("j", question, "green_box", 2, story=story))
    ordered = audit_question(ex("o", question, "red_box", 2, story=story, meta={"semantics": "ordered"}))
    assert joint is not None and ordered is not None
    assert joint.oracle_answer == "green_box" and not joint.nesting_required
    assert ordered.oracle_answer == "red_box" and ordered.nesting_required


def test_report_and_markdown():
    report = audit(None, [("test.jsonl", [NESTED, PARTIAL, NESTED3, FIRST, UNPARSED_QUESTION])])
    (entry,) = report["tests"]
    two = entry["partial_tom"]["toy"]["2"]
    assert (two["n"], two["n_not_parsed"], two["best_rule"], two["flagged"]) == (2, 1, "first_named", True)
    json.dumps(report)
    markdown = to_markdown(report)
    assert f"### {PARTIAL_TOM_TITLE}" in markdown
    assert "| toy | 2 | 2 | 1 | 50.0 [9.5, 90.5] | 50.0 [9.5, 90.5] | first_named | 50.0 [9.5, 90.5] | 33.3 | +16.7 | FLAG |" in markdown
    assert "| toy | 3 | 1 | 0 |" in markdown


def test_report_without_nested_questions():
    markdown = to_markdown(audit(None, [("test.jsonl", [FIRST])]))
    assert "(no location questions of order ≥ 2)" in markdown


def test_cli_prints_the_section(tmp_path, capsys):
    path = tmp_path / "test.jsonl"
    write_examples(path, [NESTED, PARTIAL, NESTED3, FIRST])
    out_json = tmp_path / "audit.json"
    assert main(["data", "audit", "--test", str(path), "--json", str(out_json)]) == 0
    markdown = capsys.readouterr().out
    assert f"### {PARTIAL_TOM_TITLE}" in markdown
    assert "| toy | 2 | 2 | 0 | 50.0 [9.5, 90.5] |" in markdown
    (entry,) = json.loads(out_json.read_text())["tests"]
    assert entry["partial_tom"]["toy"]["3"]["nesting_required"]["k"] == 1


def test_a_story_on_one_line_is_read_sentence_by_sentence():
    # ToM-RL's copies join the sentences on one line; ToMi's distractors have no period.
    story = ("Mila entered the attic. Chloe entered the attic. Mila loves the plum Chloe hates the hat The hat is in the suitcase. "
             "Chloe exited the attic. Mila moved the hat to the pantry. Chloe entered the lounge.")
    q = audit_question(ex("tomi-line", "Where does Mila think that Chloe searches for the hat?", "suitcase", 2, story=story, source="tomrl-paper-tomi"))
    assert q is not None and q.oracle_answer == "suitcase"
    assert q.first_order == {"Mila": "pantry", "Chloe": "suitcase"} and not q.nesting_required
    broken = story.replace("Mila moved the hat", "Mila nudged the hat")
    assert audit_question(ex("broken", "Where does Mila think that Chloe searches for the hat?", "suitcase", 2, story=broken)) is None
