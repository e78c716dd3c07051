"""Accuracy on nesting-required questions, reported apart (``by_nesting``) in results.json and the printed tables."""

from __future__ import annotations

import json
import re

from fake_openai_server import FakeOpenAIServer

from tomrl.cli import main
from tomrl.evaluation.results import NESTING_GROUPS, summarize_benchmark
from tomrl.generators.config import GenerateConfig
from tomrl.generators.dataset import generate
from tomrl.schema import write_examples
from tomrl.world.oracle import BeliefOracle
from tomrl.world.parsers import parse_question, parse_story
from tomrl.world.partial import nesting_required, partial_answers


def _row(i: str, order: int, correct: bool) -> dict:
    return {"id": i, "order": order, "question_type": "q", "correct": correct, "paper_correct": correct, "format_ok": True,
            "paper_format_ok": True, "tokens": 5, "finish_reason": "stop"}


def test_summary_groups_rows_by_their_flag():
    rows = [_row("a", 2, True), _row("b", 2, False), _row("c", 3, False), _row("d", 1, True)]
    summary = summarize_benchmark(rows, nesting={"a": False, "b": True, "c": True, "zz": True})
    assert list(summary["by_nesting"]) == ["nesting required", "partially answerable"]
    required, partial = summary["by_nesting"]["nesting required"], summary["by_nesting"]["partially answerable"]
    assert (required["n"], required["strict"]["accuracy"]["k"]) == (2, 0)
    assert (partial["n"], partial["strict"]["accuracy"]["k"]) == (1, 1)
    assert "by_nesting" not in summarize_benchmark(rows)
    assert "by_nesting" not in summarize_benchmark(rows, nesting={"zz": True})  # names none of the rows
    assert set(NESTING_GROUPS.values()) == {"nesting required", "partially answerable"}


def test_the_no_tom_baseline_stands_beside_each_nesting_group():
    from tomrl.audit.partial import nesting_required_ids
    from tomrl.evaluation.results import no_tom_rules

    examples = generate(GenerateConfig(n=60, seed=8, orders=[2, 3], lengths=[2, 3], agents=4, deception=[False], shortcut_neutral=True))
    flags = nesting_required_ids(examples)
    baseline = no_tom_rules(examples, nesting=flags)
    for flag, group in NESTING_GROUPS.items():
        entry = baseline["by_nesting"][group]
        assert entry["n"] == sum(value is flag for value in flags.values()) > 0
        assert entry["rule"] is not None and entry["accuracy"]["n"] == entry["n"]
    assert "by_nesting" not in no_tom_rules(examples)


def _story_and_question(prompt: str) -> tuple[str, str]:
    match = re.search(r"Story: (.*)\nQuestion: (.*?)\n", prompt, re.DOTALL)
    assert match is not None, prompt
    return match.group(1), match.group(2)


def left_first_reader(prompt: str) -> str:
    """A reader without nesting: the own belief of the named agent who left a room first."""
    story, question = _story_and_question(prompt)
    query = parse_question(question)
    oracle = BeliefOracle(parse_story(story, "hitom"))
    if query.kind != "belief":
        return oracle.answer(query) or "nowhere"
    return partial_answers(oracle, query.chain, query.obj)["left_first"] or "nowhere"


def test_eval_reports_the_nesting_split_of_generated_questions(tmp_path, capsys):
    examples = generate(GenerateConfig(benchmark="hitom", n=60, seed=3, orders=[1, 2, 3, 4], split_fractions={"test": 1.0}))
    path = tmp_path / "nested.jsonl"
    write_examples(path, examples)
    # The split, computed here from the world layer alone: orders >= 2 only.
    required, partial, reader_right = set(), set(), set()
    for e in examples:
        query = parse_question(e.question)
        oracle = BeliefOracle(parse_story(e.story, "hitom"))
        if e.order >= 2:
            (required if nesting_required(oracle, query.chain, query.obj) else partial).add(e.id)
            if partial_answers(oracle, query.chain, query.obj)["left_first"] == e.answer:
                reader_right.add(e.id)
    assert required and partial and len(required | partial) == sum(e.order >= 2 for e in examples)

    out = tmp_path / "run"
    with FakeOpenAIServer(answer_fn=left_first_reader) as server:
        code = main(["eval", "--engine", "openai", "--model", "fake", "--benchmark", str(path), "--out", str(out),
                     f"openai.base_url={server.base_url}", "openai.concurrency=4"])
    assert code == 0
    printed = capsys.readouterr().out
    (bench,) = json.loads((out / "results.json").read_text())["benchmarks"].values()
    by_nesting = bench["by_nesting"]
    assert by_nesting["nesting required"]["n"] == len(required)
    assert by_nesting["partially answerable"]["n"] == len(partial)
    # One agent's own belief is never the answer of a nesting-required question.
    assert not reader_right & required
    assert by_nesting["nesting required"]["strict"]["accuracy"]["k"] == 0
    assert by_nesting["partially answerable"]["strict"]["accuracy"]["k"] == len(reader_right) > 0
    assert bench["by_order"]["1"]["n"] == sum(e.order == 1 for e in examples)  # order 1: in no nesting group
    # Shown where the per-order results are: printed by tomrl eval and in table.md.
    for text in (printed, (out / "table.md").read_text()):
        assert "### file-nested by nesting" in text
        assert f"| nesting required | {len(required)} | " in text
        assert f"| partially answerable | {len(partial)} | " in text
