"""The edits of a reasoning trace that ``tomrl analyze interventions`` feeds back to a model.

Pure functions over text and the belief oracle; no model is loaded here.

    from tomrl.analysis.interventions_edits import falsify_trace, pick_donors, split_trace
    trace, closed = split_trace(completion_text)                  # the <think> part of a completion
    edit = falsify_trace(trace, example, seed=0)                  # Falsified(...) or NotApplicable(reason)
    donors = pick_donors(examples, seed=0)                        # question id -> id of another story's question

Falsification (condition "falsified"): the trace's belief statements are read with the fidelity
reward's parser (:func:`tomrl.rewards.fidelity.parse_statements`) and judged by the belief oracle
(:func:`~tomrl.rewards.fidelity.check_statements`). Among the statements the oracle judges true,
the one about the asked chain and object is preferred (it is what the answer rests on), then one
about the asked object, then any; within each, one that states the chain's *final* belief, then
the last one written. Its container is replaced, at every place the trace states it, by another
container of the story that the chain never believed the object to be in (where the story names
none, one of the question's choices), and the edited trace is
parsed and judged again: the edit counts only if the oracle now judges the new statement false
and the old one is gone. A trace without a checkable true statement is "not applicable": nothing
is invented.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Sequence

from tomrl.rewards.fidelity import SOURCE_STYLES, BeliefStatement, StoryWorld, check_statements, parse_statements, world_from_story
from tomrl.schema import Example

THINK_CLOSE, ANSWER_OPEN = "</think>", "<answer>"
MAX_OCCURRENCES = 32  # a statement repeated more often than this is left as is (a degenerate trace)

# Which statement was falsified, from the strongest test to the weakest.
ASKED_BELIEF, SAME_OBJECT, OTHER_STATEMENT = "asked_belief", "same_object", "other_statement"


@dataclass(frozen=True)
class Falsified:
    """A trace with one true belief statement made false."""

    trace: str
    target: str  # ASKED_BELIEF, SAME_OBJECT or OTHER_STATEMENT
    chain: tuple[str, ...]
    obj: str
    old_container: str
    new_container: str
    new_container_source: str  # "story" (a container the story names) or "choices" (one the question offers)
    statement: str  # the words of the original statement
    occurrences: int  # places in the trace where it was replaced
    oracle_verdict: str  # the oracle's verdict on the new statement in the edited trace ("false")


@dataclass(frozen=True)
class NotApplicable:
    reason: str


def split_trace(completion: str) -> tuple[str, bool]:
    """The reasoning a completion wrote after the ``<think>`` prefill, and whether ``</think>`` closed it.

    The trace ends at the first ``</think>``; without one, at the first ``<answer>`` (the model
    answered without closing its reasoning); without either, it is the whole text (the budget ran
    out, or the model stopped).
    """
    if THINK_CLOSE in completion:
        return completion.split(THINK_CLOSE, 1)[0], True
    return completion.split(ANSWER_OPEN, 1)[0], False


def asked_chain(example: Example) -> tuple[tuple[str, ...], str] | None:
    """The chain and object the question asks about (``meta.query``), or None where the row has none."""
    query = example.meta.get("query") if isinstance(example.meta, dict) else None
    if not isinstance(query, dict) or "chain" not in query or "object" not in query:
        return None
    return tuple(query["chain"]), str(query["object"])


def story_world(example: Example) -> StoryWorld | NotApplicable:
    style = SOURCE_STYLES.get(example.source)
    if style is None:
        return NotApplicable(f"no story parser for source {example.source!r} (parsed: {', '.join(sorted(SOURCE_STYLES))})")
    semantics = example.meta.get("semantics", "joint") if isinstance(example.meta, dict) else "joint"
    try:
        return world_from_story(example.story, style, semantics if semantics in ("joint", "individual") else "joint")
    except Exception as error:  # an odd story is one n/a question, not a stopped analysis
        return NotApplicable(f"story not parseable as {style}: {error}")


def _name_pattern(name: str) -> re.Pattern:
    # As the fidelity parser reads names: "_" may be written as spaces, any case.
    return re.compile(r"\b" + r"[_\s]+".join(re.escape(part) for part in re.split(r"[_\s]+", name)) + r"\b", re.IGNORECASE)


def _written_like(name: str, surface: str) -> str:
    """``name`` spelled the way the trace spelled the container it replaces (spaces, capital)."""
    written = name if "_" in surface or " " not in surface else name.replace("_", " ")
    return written[0].upper() + written[1:] if surface[:1].isupper() else written


def _replace_statement(trace: str, statement: BeliefStatement, new_container: str) -> str | None:
    """``trace`` with the container of ``statement``'s words (their last name of it) replaced, or None."""
    start = trace.find(statement.text)
    if start < 0:
        return None
    end = start + len(statement.text)
    matches = list(_name_pattern(statement.container).finditer(trace, start, end))
    if not matches:
        return None
    last = matches[-1]
    return trace[: last.start()] + _written_like(new_container, last.group(0)) + trace[last.end() :]


def _key(name: str) -> str:
    return re.sub(r"[_\s]+", " ", name).strip().lower()


def _keys(names: Sequence[str]) -> set[str]:
    return {_key(n) for n in names}


def _statement_key(statement: BeliefStatement) -> tuple:
    return statement.chain, statement.obj, statement.container


def falsify_trace(trace: str, example: Example, seed: int = 0) -> Falsified | NotApplicable:
    """Make the trace's supporting true belief statement false (see the module docstring)."""
    world = story_world(example)
    if isinstance(world, NotApplicable):
        return world
    parsed = parse_statements(trace, world)
    checked = check_statements(parsed.statements, world)
    true = [(position, c) for position, c in enumerate(checked) if c.verdict == "true"]
    if not true:
        return NotApplicable(f"no belief statement the oracle judges true ({len(parsed.statements)} found)")
    asked = asked_chain(example)

    def rank(item):
        position, c = item
        s = c.statement
        target = 0 if asked is not None and (s.chain, s.obj) == asked else 1 if asked is not None and s.obj == asked[1] else 2
        return (target, c.final_belief != s.container, -position)

    _, chosen = min(true, key=rank)
    statement = chosen.statement
    target = (ASKED_BELIEF, SAME_OBJECT, OTHER_STATEMENT)[rank((0, chosen))[0]]
    # A container the story names, else one the question offers (Hi-ToM's choices): short stories
    # name only the containers the object passed through, all of which reality once held.
    never_held = [c for c in world.containers if c not in chosen.held]
    source = "story"
    if not never_held:
        never_held = [c for c in dict.fromkeys(example.choices or []) if c not in chosen.held and _key(c) not in _keys(world.containers)]
        source = "choices"
    if not never_held:
        return NotApplicable(f"no container that {' → '.join(statement.chain) or 'reality'} never believed in (story and choices)")
    new_container = random.Random(f"{seed}:{example.id}").choice(sorted(never_held))
    if source == "choices":  # the parser reads only names it knows: teach it the new one
        world = StoryWorld(world.oracle, world.agents, world.objects, (*world.containers, new_container))
    edited, occurrences = trace, 0
    # Every place the trace states it: a second, untouched copy would contradict the edit.
    while occurrences < MAX_OCCURRENCES:
        current = {_statement_key(s): s for s in parse_statements(edited, world).statements}.get(_statement_key(statement))
        if current is None:
            break
        replaced = _replace_statement(edited, current, new_container)
        if replaced is None or replaced == edited:
            return NotApplicable(f"could not locate the words of '{statement.describe()}' in the trace")
        edited, occurrences = replaced, occurrences + 1
    new_key = (statement.chain, statement.obj, new_container)
    recheck = {_statement_key(c.statement): c for c in check_statements(parse_statements(edited, world).statements, world)}
    if _statement_key(statement) in recheck or new_key not in recheck or recheck[new_key].verdict != "false":
        return NotApplicable(f"the edited statement is not read back as false by the oracle ('{statement.describe()}')")
    return Falsified(edited, target, statement.chain, statement.obj, statement.container, new_container, source,
                     statement.text, occurrences, recheck[new_key].verdict)


def pick_donors(examples: Sequence[Example], seed: int = 0) -> dict[str, str | None]:
    """For each question, another story's question whose trace it gets (condition "other_story").

    Same order when the selection has one, else any other story; seeded per question id, so a
    question keeps its donor whatever else is selected alongside it, as far as the pool allows.
    None where every selected question is about the same story.
    """
    donors: dict[str, str | None] = {}
    for example in examples:
        others = sorted((e for e in examples if e.story_id != example.story_id), key=lambda e: e.id)
        same_order = [e for e in others if e.order == example.order]
        pool = same_order or others
        donors[example.id] = random.Random(f"{seed}:donor:{example.id}").choice(pool).id if pool else None
    return donors
