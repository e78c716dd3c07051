"""Trace interventions: planted answer behaviours are detected, the falsified belief is really false, runs resume."""

from __future__ import annotations

import json
import re

import pytest

from tomrl.analysis.interventions import CONDITIONS, InterventionsConfig, compared_answer, run_interventions
from tomrl.analysis.interventions_edits import falsify_trace, pick_donors, split_trace, story_world
from tomrl.generation.base import Completion
from tomrl.generators.config import GenerateConfig
from tomrl.generators.dataset import generate
from tomrl.rewards.fidelity import StoryWorld, check_statements, parse_statements
from tomrl.schema import read_examples, write_examples

N_QUESTIONS = 12


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from tomrl.models import embedded_tokenizer_dir

    return AutoTokenizer.from_pretrained(str(embedded_tokenizer_dir()))


@pytest.fixture(scope="module")
def questions(tmp_path_factory):
    path = tmp_path_factory.mktemp("interventions-data") / "held_out.jsonl"
    write_examples(path, generate(GenerateConfig(n=N_QUESTIONS, seed=2, orders=[0, 1, 2], lengths=[1], split_fractions={"test": 1.0})))
    return path


def stated_belief(example) -> str:
    """The sentence a faithful reasoner would end on: the asked chain's belief, as the oracle has it."""
    chain, obj = example.meta["query"]["chain"], example.meta["query"]["object"]
    who = "".join(f"{name} thinks " for name in chain)
    return f"{who[:1].upper()}{who[1:]}the {obj} is in the {example.answer}." if who else f"The {obj} is in the {example.answer}."


class ScriptedEngine:
    """A text engine whose reasoning states the asked belief and whose answer follows ``answer_from``.

    ``answer_from(example, trace)`` gives the container it answers after a trace; it plants the
    behaviour the analysis must detect. Counts every prompt it is asked to complete.
    """

    name = model_name = "scripted"
    prompt_kind = "text"

    def __init__(self, tokenizer, examples, answer_from, fail_after: int | None = None):
        self.tokenizer = tokenizer
        self.examples = examples
        self.answer_from = answer_from
        self.fail_after = fail_after
        self.calls = 0

    def describe(self):
        return {"engine": "scripted"}

    def _example(self, prompt: str):
        (example,) = [e for e in self.examples if e.story in prompt and e.question in prompt]
        return example

    def generate(self, prompts, sampling):
        for index, prompt in enumerate(prompts):
            if self.fail_after is not None and self.calls >= self.fail_after:
                raise KeyboardInterrupt  # a kill in the middle of a run
            self.calls += 1
            example = self._example(prompt)
            if prompt.endswith("<think>"):  # the model's own reasoning, then its free answer
                trace = f" The {example.meta['query']['object']} was somewhere at first. {stated_belief(example)} "
                text = f"{trace}</think><answer>{self.answer_from(example, trace)}</answer>"
            else:  # a forced answer after an edited trace
                assert prompt.endswith("</think><answer>")
                trace = prompt.rsplit("<think>", 1)[1].rsplit("</think>", 1)[0]
                text = f"{self.answer_from(example, trace)}</answer>"
            yield Completion(index, text, tokens=len(text.split()), prompt_tokens=len(prompt.split()), finish_reason="stop")


def ignores_trace(example, trace: str) -> str:
    return story_world(example).containers[0]  # the story's first container, whatever was reasoned


def copies_last_belief(example, trace: str) -> str:
    found = re.findall(r"is in the (\w+)", trace)
    return found[-1] if found else "nowhere"


def _run(tmp_path, questions, tokenizer, answer_from, out="out", **engine_options):
    examples = read_examples(questions)
    engine = ScriptedEngine(tokenizer, examples, answer_from, **engine_options)
    cfg = InterventionsConfig(models=["scripted=scripted"], data=str(questions), out=str(tmp_path / out), limit=None)
    return run_interventions(cfg, engine_for=lambda model: engine), engine


def test_answer_that_ignores_the_trace_is_not_carried_by_it(tmp_path, questions, tokenizer):
    summary, _ = _run(tmp_path, questions, tokenizer, ignores_trace)
    entry = summary["models"]["scripted"]
    falsified = entry["conditions"]["falsified"]["overall"]
    assert falsified["n"] == N_QUESTIONS and falsified["n_not_applicable"] == 0  # every trace states the asked belief
    assert falsified["changed"]["k"] == 0 and falsified["changed"]["high"] < 0.5
    assert entry["conditions"]["empty"]["overall"]["changed"]["k"] == 0
    assert entry["falsified_targets"] == {"asked_belief": N_QUESTIONS}
    assert "not carried by the trace" in entry["verdict"] and "0 %" in entry["verdict"]


def test_answer_that_follows_the_last_stated_belief_moves_with_it(tmp_path, questions, tokenizer):
    summary, engine = _run(tmp_path, questions, tokenizer, copies_last_belief)
    assert engine.calls == N_QUESTIONS * (1 + len(CONDITIONS))
    conditions = summary["models"]["scripted"]["conditions"]
    assert conditions["falsified"]["overall"]["changed"]["value"] == 1.0
    assert conditions["falsified_asked"]["overall"]["changed"]["value"] == 1.0
    assert conditions["falsified"]["overall"]["accuracy"]["k"] == 0  # the answer followed the false belief
    assert conditions["own"]["overall"]["accuracy"]["value"] == 1.0 and conditions["own"]["overall"]["changed"]["k"] == 0
    assert conditions["empty"]["overall"]["changed"]["value"] == 1.0  # "nowhere"
    assert conditions["falsified"]["overall"]["changed"]["low"] > 0.5
    assert sum(cell["n"] for cell in conditions["falsified"]["by_order"].values()) == N_QUESTIONS
    assert "follows the stated belief" in summary["models"]["scripted"]["verdict"]
    on_disk = json.loads((tmp_path / "out" / "interventions.json").read_text())
    assert on_disk["models"] == summary["models"] and on_disk["computed_on"]["n_selected"] == N_QUESTIONS
    rows = [json.loads(line) for line in (tmp_path / "out" / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == N_QUESTIONS * len(CONDITIONS)
    other = [r for r in rows if r["condition"] == "other_story"]
    by_id = {e.id: e for e in read_examples(questions)}
    assert all(by_id[r["donor_id"]].story_id != by_id[r["id"]].story_id for r in other)


def test_the_falsified_statement_is_contradicted_by_the_oracle(questions):
    for example in read_examples(questions):
        trace = f" The {example.meta['query']['object']} was somewhere. {stated_belief(example)} Then {stated_belief(example)} "
        edit = falsify_trace(trace, example, seed=3)
        world = story_world(example)
        if edit.new_container_source == "choices":  # one the question offers: the parser must know its name
            world = StoryWorld(world.oracle, world.agents, world.objects, (*world.containers, edit.new_container))
        checked = {(c.statement.chain, c.statement.container): c for c in check_statements(parse_statements(edit.trace, world).statements, world)}
        chain = tuple(example.meta["query"]["chain"])
        assert edit.target == "asked_belief" and edit.old_container == example.answer and edit.occurrences == 2
        assert checked[(chain, edit.new_container)].verdict == "false"
        assert (chain, example.answer) not in checked  # both copies replaced
        held, _ = world.held_beliefs(chain, example.meta["query"]["object"])
        assert edit.new_container not in held
        # Only the container changed: the rest of the sentence is intact.
        assert edit.trace.replace(edit.new_container, example.answer) == trace


def test_trace_without_a_checkable_belief_is_not_applicable_and_nothing_is_invented(questions):
    example = read_examples(questions)[0]
    assert "no belief statement" in falsify_trace(" I need to read the story carefully. ", example).reason
    assert split_trace(" a b </think><answer>x</answer>") == (" a b ", True)
    assert split_trace(" a b <answer>x</answer>") == (" a b ", False)
    assert split_trace(" unfinished") == (" unfinished", False)
    # Answers are compared by what they say: format failures that name different containers differ.
    assert compared_answer("red_box</answer>") == compared_answer(" The red box.</answer>") == "red box"
    assert compared_answer(" The red_box.</think>") != compared_answer(" The green_box.</think>")
    assert compared_answer("</answer>") is None and compared_answer(None) is None


def test_donors_come_from_other_stories_of_the_same_order(questions):
    examples = read_examples(questions)
    donors = pick_donors(examples, seed=0)
    by_id = {e.id: e for e in examples}
    for question, donor in donors.items():
        assert by_id[donor].story_id != by_id[question].story_id and by_id[donor].order == by_id[question].order
    assert pick_donors(examples[:1], seed=0) == {examples[0].id: None}


def test_a_killed_run_resumes_without_redoing_rows(tmp_path, questions, tokenizer):
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, questions, tokenizer, copies_last_belief, fail_after=N_QUESTIONS + 10)
    partial = json.loads((tmp_path / "out" / "interventions.json").read_text())
    assert partial["models"]["scripted"]["complete"] is False
    summary, engine = _run(tmp_path, questions, tokenizer, copies_last_belief)
    assert engine.calls == N_QUESTIONS * (1 + len(CONDITIONS)) - (N_QUESTIONS + 10)
    whole, _ = _run(tmp_path, questions, tokenizer, copies_last_belief, out="uninterrupted")
    for label in ("complete", "verdict", "conditions"):
        assert summary["models"]["scripted"][label] == whole["models"]["scripted"][label]
    again, engine = _run(tmp_path, questions, tokenizer, copies_last_belief)
    assert engine.calls == 0 and again["models"] == summary["models"]


def test_bad_input_names_file_row_and_field(tmp_path, questions):
    from tomrl.cli import main

    lines = questions.read_text().splitlines()
    row = json.loads(lines[2])
    row["meta"]["query"]["chain"] = "Anna"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines[:2] + [json.dumps(row)] + lines[3:]) + "\n")
    with pytest.raises(Exception) as error:
        run_interventions(InterventionsConfig(models=["m=x"], data=str(bad), out=str(tmp_path / "o")))
    assert f"{bad}:3" in str(error.value) and "meta.query.chain" in str(error.value)
    row = json.loads(lines[1])
    del row["answer"]
    bad.write_text("\n".join(lines[:1] + [json.dumps(row)]) + "\n")
    assert main(["analyze", "interventions", "--model", "m=x", "--data", str(bad), "--out", str(tmp_path / "o")]) == 2


def test_report_sections_render(tmp_path, questions, tokenizer):
    from tomrl.analysis.document import Document, Figure, Table, render_markdown
    from tomrl.analysis.interventions_report import report_sections

    _run(tmp_path, questions, tokenizer, copies_last_belief, out="a")
    _run(tmp_path, questions, tokenizer, ignores_trace, out="b")
    files = [tmp_path / "a" / "interventions.json", tmp_path / "b" / "interventions.json"]
    (sections,) = report_sections(files, tmp_path / "report")
    tables = [b for b in sections.blocks if isinstance(b, Table)]
    assert len(tables) == 2 and len(tables[0].rows) == 5 * 4  # 5 conditions (falsified_asked too) × (all + 3 orders)
    (figure,) = [b for b in sections.blocks if isinstance(b, Figure)]
    assert (tmp_path / "report" / figure.file).read_bytes().startswith(b"\x89PNG")
    markdown = render_markdown(Document("t", [sections]))
    assert "100.0 % [" in markdown and "not carried by the trace" in markdown


def test_tiny_model_end_to_end_through_the_command(tmp_path, questions, tiny_qwen2):
    from tomrl.cli import main

    out = tmp_path / "tiny"
    argv = ["analyze", "interventions", "--model", f"tiny={tiny_qwen2}", "--data", str(questions), "--limit", "3",
            "--max-new-tokens", "6", "--answer-tokens", "3", "--dtype", "float32", "--out", str(out)]
    assert main(argv) == 0
    summary = json.loads((out / "interventions.json").read_text())
    entry = summary["models"]["tiny"]
    assert entry["complete"] and entry["traces"]["n"] == 3
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 3 * len(CONDITIONS)
    falsified = entry["conditions"]["falsified"]["overall"]
    assert falsified["n"] + falsified["n_not_applicable"] == 3  # random weights state no belief: n/a, counted
    assert all(r["applicable"] for r in rows if r["condition"] != "falsified")
    assert main(argv) == 0 and len((out / "samples.jsonl").read_text().splitlines()) == 3 * len(CONDITIONS)
