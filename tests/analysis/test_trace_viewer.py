"""The trace viewer: the first false statement marked, model output escaped, both renderings, and
the questions drawn from real evaluation folders."""

from __future__ import annotations

import pytest
from analysis_run_folders import KITCHEN_STORY

from tomrl.analysis.document import Document, Section, TraceColumn, TraceView, render_html, render_markdown
from tomrl.analysis.runs import read_evaluation
from tomrl.analysis.trace_viewer import judge_trace, oracle_lines, trace_views
from tomrl.rewards.fidelity import world_from_story

STORY = KITCHEN_STORY
FIRST_FALSE = "Anna thinks the apple is in the green_drawer"


def test_judge_trace_marks_exactly_the_first_false_statement():
    world = world_from_story(STORY, "hitom")
    text = (f"<think>The apple is in the red_box at first. {FIRST_FALSE}. Anna thinks Ben thinks the apple is in the "
            "green_drawer.</think><answer>red_box</answer>")
    judged = judge_trace(text, world)
    assert judged.checked == 3 and judged.false == 2
    start, end = judged.mark
    assert text[start:end] == FIRST_FALSE and start == text.index(FIRST_FALSE)
    assert judged.notes[0].startswith("✓ true: the apple is in the red_box")
    assert judged.notes[1].startswith(f"✗ false: {FIRST_FALSE}") and "oracle: Anna → red_box" in judged.notes[1]
    assert judge_trace("<think>The apple is in the red_box.</think>", world).mark is None


def test_judge_trace_marks_the_clause_of_a_false_statement_after_a_true_one():
    world = world_from_story(STORY, "hitom")
    text = f"<think>Ben thinks the apple is in the green_drawer. So {FIRST_FALSE}.</think>"
    start, end = judge_trace(text, world).mark
    assert text[start:end].endswith(FIRST_FALSE) and text.index(FIRST_FALSE) >= start


def test_oracle_lines_build_the_chain_inside_out():
    world = world_from_story(STORY, "hitom")
    lines = oracle_lines(world, ("Carl", "Anna"), "apple")
    assert lines[0] == "reality (end of story) → green_drawer"
    assert lines[1:] == ["Carl thinks → green_drawer", "Anna thinks → red_box",
                         "Carl thinks Anna thinks → red_box  ← asked"]


def _view(trace: str, mark: tuple[int, int] | None) -> TraceView:
    return TraceView("hitom · q1 · order 1", (("story", STORY), ("question", "Where does Anna really think the apple is?"),
                                             ("gold", "red_box")),
                     (TraceColumn("before: base", "wrong", "<b>green</b>", trace, mark, ("✗ false: …",)),
                      TraceColumn("after: rl", "correct", "red_box", "<think>fine</think>")))


def test_trace_view_escapes_model_output_in_html_and_marks_the_statement(tmp_path):
    trace = f"<script>alert('x')</script> {FIRST_FALSE}. ```code```"
    start = trace.index(FIRST_FALSE)
    view = _view(trace, (start, start + len(FIRST_FALSE)))
    page = render_html(Document("t", [Section("Traces", [view])]), tmp_path)
    assert "<script" not in page and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert f"<mark>{FIRST_FALSE}</mark>" in page
    assert "&lt;b&gt;green&lt;/b&gt;" in page and "<b>" not in page
    markdown = render_markdown(Document("t", [Section("Traces", [view])]))
    assert f"⟦✗ {FIRST_FALSE} ⟧" in markdown
    assert "````text\n<script>alert('x')</script>" in markdown  # verbatim in a fence longer than the trace's ```
    assert "answered &lt;b&gt;green&lt;/b&gt;" in markdown  # outside code, HTML is shown as text
    for text in ("hitom · q1 · order 1", "before: base", "after: rl", "Where does Anna really think the apple is?",
                 "5 Ben exited the kitchen."):
        assert text in markdown and text in page


def test_a_mark_outside_the_trace_is_refused():
    with pytest.raises(ValueError, match="not a stretch"):
        TraceColumn("m", "wrong", "", "short", (2, 99))


def _false_container(example):
    world = world_from_story(example.story, "hitom")
    chain, obj = tuple(example.meta["query"]["chain"]), example.meta["query"]["object"]
    held = world.held_beliefs(chain, obj)[0]
    return next((c for c in world.containers if c not in held), None), chain, obj


@pytest.fixture(scope="module")
def two_evaluations(tmp_path_factory):
    from analysis_run_folders import write_evaluation

    def base_answer(example, correct):
        wrong, chain, obj = _false_container(example)
        statement = f"{' thinks '.join(chain)} thinks the {obj} is in the {wrong}. " if wrong else ""
        return f"<script>x</script> {statement}</think><answer>{wrong or example.answer}</answer>"

    def trained_answer(example, correct):
        chain, obj = example.meta["query"]["chain"], example.meta["query"]["object"]
        return f"{' thinks '.join(chain)} thinks the {obj} is in the {example.answer}.</think><answer>{example.answer}</answer>"

    root = tmp_path_factory.mktemp("traces")
    orders = {f"tomrl-hitom-order{k}": {k: 0.5} for k in (1, 2)}
    base = write_evaluation(root / "base", "smollm2-135m", orders, answer=base_answer, heldout_n=12)
    after = write_evaluation(root / "after", "rl/final", orders, answer=trained_answer, heldout_n=12)
    return read_evaluation(base), read_evaluation(after)


def test_trace_views_pair_the_same_questions_spread_over_orders(two_evaluations, tmp_path):
    base, after = two_evaluations
    views, notes = trace_views([("before", base), ("after", after)], count=4, seed=3)
    assert len(views) == 4 and notes == []
    assert sorted(v.title.rsplit("order ", 1)[1] for v in views) == ["1", "1", "2", "2"]
    for view in views:
        facts = dict(view.facts)
        assert {"story", "question", "gold", "oracle"} <= set(facts) and "← asked" in facts["oracle"]
        before, trained = view.columns
        assert (before.label, trained.label) == ("before", "after")
        assert trained.outcome == "correct" and trained.mark is None and trained.notes[-1] == "names every asked agent"
        if before.mark is not None:  # a false belief was planted where the story allows one
            assert before.outcome == "wrong" and before.text[before.mark[0]:before.mark[1]].endswith(before.answer)
    assert any(v.columns[0].mark for v in views)
    again, _ = trace_views([("before", base), ("after", after)], count=4, seed=3)
    assert [v.title for v in again] == [v.title for v in views]  # seeded
    assert trace_views([("before", base), ("after", after)], count=0) == ([], [])
    page = render_html(Document("t", [Section("Traces", list(views))]), tmp_path)
    assert "<script" not in page and "&lt;script&gt;" in page


def test_trace_views_need_two_models_on_the_same_question(two_evaluations):
    base, _ = two_evaluations
    assert trace_views([("before", base)], count=4) == ([], [])
