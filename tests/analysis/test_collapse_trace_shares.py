"""What the traces still do over training: naming every asked agent, self-reflection phrases."""

from __future__ import annotations

import pytest
from analysis_run_folders import KITCHEN_STORY

from tomrl.analysis.runs import Trace, load_runs
from tomrl.analysis.trace_shares import asked_agents, mentions_every_agent, reflection_phrases, reflects, shares_by_step

STORY = KITCHEN_STORY


@pytest.mark.parametrize("text", [
    "Wait, Ben moved it.", "Hmm, Anna left first.", "Let me re-check the story.", "let me recheck", "Let me check again:",
    "let me double-check", "On second thought, Ben saw it.", "The apple is in the box. Actually, Ben moved it.",
    "No, actually it is there.", "Actually Ben left.", "I made a mistake.", "That's wrong.", "let me reconsider",
])
def test_self_reflection_phrases_are_found(text):
    assert reflects(text), text
    assert reflection_phrases(text)


@pytest.mark.parametrize("text", [
    "Anna awaits Ben.", "They were waiting in the hall.", "Ben waited.", "All entered the waiting_room.",
    "The apple is actually in the red_box.",  # an assertion, not a correction
    "hm", "Anna thinks the apple is in the red_box.", "Let me see.", "that is right",
])
def test_self_reflection_ignores_look_alikes(text):
    assert not reflects(text), reflection_phrases(text)


def test_mentions_every_agent_needs_whole_names():
    assert mentions_every_agent("anna thinks Ben's view is …", ("Anna", "Ben"))
    assert not mentions_every_agent("Anna thinks …", ("Anna", "Ben"))
    assert not mentions_every_agent("Annabel and Ben", ("Anna", "Ben"))
    assert not mentions_every_agent("Ben_x", ("Ben",))
    assert mentions_every_agent("anything", ())  # nothing asked, nothing missing


def test_asked_agents_from_meta_then_question_then_story():
    assert asked_agents(["Anna", "Ben"], "ignored") == (("Anna", "Ben"), "meta.query.chain")
    assert asked_agents(None, "Where does Carl think Anna thinks the apple is?") == (("Carl", "Anna"), "parsed from the question")
    agents, how = asked_agents(None, "Which box would Ben guess Anna picked for the apple?", STORY, "tomrl-hitom")
    assert agents == ("Ben", "Anna") and how == "story's agents named in the question"
    assert asked_agents(None, "Which box would Ben guess?", None, None)[0] is None
    assert asked_agents(None, None)[0] is None


def test_shares_by_step_count_planted_rollouts():
    def trace(step, text, chain=None, question=None):
        return Trace(step, text, STORY, "tomrl-hitom", question, chain)

    traces = [
        trace(1, "Anna and Ben saw it. Wait.</think><answer>red_box</answer>", ("Anna", "Ben")),
        trace(1, "Anna saw it.</think><answer>red_box</answer>", ("Anna", "Ben")),  # Ben missing
        trace(1, "The apple is in the red_box.</think><answer>red_box</answer>", ()),  # reality: no agent asked
        trace(2, "Carl left.</think><answer>x</answer>", None, "Where does Carl really think the apple is?"),
        trace(2, "Hmm. Nobody.</think><answer>Carl wait</answer>", None, None),  # unknown question; answer not read
    ]
    shares = shares_by_step(traces, prefill="<think>")
    assert [(s.step, s.hits, s.traces) for s in shares.mention] == [(1, 1, 2), (2, 1, 1)]
    assert [(s.step, s.hits, s.traces) for s in shares.reflection] == [(1, 1, 3), (2, 1, 2)]
    assert shares.agents_from == {"meta.query.chain": 3, "parsed from the question": 1, "no question": 1}
    assert any("1 rollouts have no known question" in note for note in shares.notes)
    assert any("reality questions" in note for note in shares.notes)


def test_rollouts_are_read_with_their_questions(tmp_path):
    from analysis_run_folders import write_training_run

    def rollout(example, step):
        return f"Wait, {' and '.join(example.meta['query']['chain'])} matter.</think><answer>{example.answer}</answer>"

    write_training_run(tmp_path / "rl", steps=range(0, 20, 2), validation_steps=(0, 18), rollout=rollout, rollout_steps=5)
    run = load_runs([tmp_path]).training[0]
    assert run.trace_source == "validation_samples.jsonl"  # beliefs are still counted on the validation answers
    assert {t.step for t in run.rollouts} == {1, 11} and all(t.question for t in run.rollouts)
    assert all(t.query_chain is not None for t in run.rollouts)
    shares = shares_by_step(run.rollouts, run.prefill)
    assert all(s.hits == s.traces for s in shares.mention + shares.reflection)
