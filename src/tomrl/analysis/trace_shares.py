"""What the reasoning traces still do over training: name every asked agent, reflect on themselves.

    from tomrl.analysis.trace_shares import asked_agents, mentions_every_agent, reflects, shares_by_step
    agents, how = asked_agents(chain=None, question="Where does Anna think Ben thinks the apple is?")
    mentions_every_agent("Anna saw Ben leave …", agents)      # True
    reflects("Wait, let me re-check the story.")              # True
    shares = shares_by_step(run.rollouts, run.prefill)         # per step: StepShare counts of each

Paper A's collapse is traces that shrink *and stop tracking beliefs*. Besides the share of traces
that state a belief (:mod:`tomrl.analysis.beliefs`), the collapse section follows two cheaper
signs over the training rollouts (``samples.jsonl``):

- **mentions every asked agent**: the reasoning names each agent of the question's chain
  ("Where does Anna think Ben thinks …" → Anna and Ben), whole words, case-insensitive. The
  chain is the row's ``meta.query.chain`` when the training data logged it, else it is parsed
  from the question (:func:`tomrl.world.parsers.parse_question`), else it is the story's agents
  (the fidelity parser's world) named in the question. Reality questions (order 0, no agent
  asked) are not counted.
- **self-reflection**: the reasoning holds one of :data:`SELF_REFLECTION_PATTERNS` ("wait",
  "hmm", "let me re-check", "on second thought", a clause-initial "actually" …), as whole
  words, case-insensitive. "awaits", "waited" and "waiting_room" do not count, nor does
  "the apple is actually in the box" (an assertion, which the fidelity parser reads as a
  location statement).

Both look at the reasoning part of the completion (:func:`tomrl.rewards.fidelity.reasoning_text`:
inside ``<think>…</think>``, else before ``<answer>``). Each is a share per step, with a 95 %
Wilson interval in the report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from tomrl.analysis.detectors import StepShare

# The documented list (docs/analysis.md): (what it is, its regex), matched case-insensitively.
SELF_REFLECTION_PATTERNS: tuple[tuple[str, str], ...] = (
    ("wait", r"\bwait\b"),
    ("hmm", r"\bhm{2,}\b"),
    ("let me re-check / recheck / check again / double-check", r"\blet\s+me\s+(?:re-?check|check\s+again|double[-\s]?check)\b"),
    ("let me re-read / reconsider / verify / think again", r"\blet\s+me\s+(?:re-?read|reconsider|verify|think\s+again)\b"),
    ("on second thought", r"\bon\s+second\s+thoughts?\b"),
    ("I made a mistake / that's wrong / that is not right",
     r"\bi\s+made\s+a\s+mistake\b|\bthat(?:'s|\s+is)\s+(?:wrong|not\s+right|incorrect)\b"),
    # Starting a clause only: "Actually, Ben left first" corrects, "the apple is actually in the box" asserts.
    ("actually (starting a clause)", r"(?:^|[.!?;:]|\bno\b\s*,?)\s*actually\b"),
)
_REFLECTION = re.compile("|".join(f"(?:{p})" for _, p in SELF_REFLECTION_PATTERNS), re.IGNORECASE | re.MULTILINE)

MENTION = "mentions every asked agent"
REFLECTION = "self-reflection phrase"


def reflects(reasoning: str) -> bool:
    """Whether the text holds a self-reflection phrase of :data:`SELF_REFLECTION_PATTERNS`."""
    return _REFLECTION.search(reasoning) is not None


def reflection_phrases(reasoning: str) -> list[str]:
    """The self-reflection phrases found, as written (for reading the traces)."""
    return [m.group(0).strip(" .!?;:,\n") for m in _REFLECTION.finditer(reasoning)]


def mentions_every_agent(reasoning: str, agents: Sequence[str]) -> bool:
    """Whether every agent is named in the text (whole words, case-insensitive, ``_`` as a space)."""
    for agent in agents:
        words = r"[_\s]+".join(re.escape(part) for part in re.split(r"[_\s]+", agent.strip()) if part)
        if not words or re.search(rf"(?<![A-Za-z0-9_]){words}(?![A-Za-z0-9_])", reasoning, re.IGNORECASE) is None:
            return False
    return True


def asked_agents(
    chain: Sequence[str] | None, question: str | None, story: str | None = None, source: str | None = None
) -> tuple[tuple[str, ...] | None, str]:
    """``(agents of the asked chain, where they came from)``; ``(None, why)`` when unknown.

    ``chain``: the row's ``meta.query.chain`` (None when not logged). Without it the question is
    parsed; when its form is unknown, the story's agents (from the fidelity parser's world of
    ``source``'s story style) that the question names are taken, in the order it names them.
    """
    if chain is not None:
        return tuple(chain), "meta.query.chain"
    if not question:
        return None, "no question"
    from tomrl.world.parsers import parse_question

    try:
        return parse_question(question).chain, "parsed from the question"
    except ValueError:
        pass
    world_agents = _story_agents(story, source)
    if world_agents is None:
        return None, "question not parsed and story not parseable"
    named = []
    for agent in world_agents:
        match = re.search(rf"\b{re.escape(agent)}\b", question, re.IGNORECASE)
        if match is not None:
            named.append((match.start(), agent))
    return tuple(agent for _, agent in sorted(named)), "story's agents named in the question"


def _story_agents(story: str | None, source: str | None) -> tuple[str, ...] | None:
    from tomrl.rewards.fidelity import world_from_story

    style = story_style(source)
    if style is None or not story:
        return None
    try:
        return world_from_story(story, style).agents
    except Exception:  # a story the parser cannot read: the agents stay unknown
        return None


def story_style(source: str | None) -> str | None:
    """The fidelity parser's story style of a data source ("hitom", "tomi"), or None.

    Known sources first (:data:`tomrl.rewards.fidelity.SOURCE_STYLES`); otherwise the source's
    data-set family, so ``tomrl-paper-hitom600`` reads as Hi-ToM.
    """
    from tomrl.analysis.runs import task_family
    from tomrl.rewards.fidelity import SOURCE_STYLES

    if not source:
        return None
    style = SOURCE_STYLES.get(str(source).lower())
    if style is not None:
        return style
    family = task_family(str(source))
    return family if family in ("hitom", "tomi") else None


@dataclass(frozen=True)
class TraceShares:
    """Per step, the rollouts mentioning every asked agent and those with a self-reflection phrase."""

    mention: list[StepShare]
    reflection: list[StepShare]
    agents_from: dict[str, int]  # where the asked agents came from → rollouts
    notes: list[str]


def shares_by_step(traces: Iterable, prefill: str) -> TraceShares:
    """Count both shares per step over ``traces`` (:class:`tomrl.analysis.runs.Trace` records).

    A trace whose asked agents are unknown (no question logged for it) counts for the
    self-reflection share only; reality questions (no agent asked) count for it only too.
    """
    from tomrl.rewards.fidelity import reasoning_text

    mention: dict[float, list[bool]] = {}
    reflection: dict[float, list[bool]] = {}
    agents_from: dict[str, int] = {}
    unknown = reality = 0
    for trace in traces:
        reasoning = reasoning_text(trace.completion, prefill)
        reflection.setdefault(trace.step, []).append(reflects(reasoning))
        agents, how = asked_agents(trace.query_chain, trace.question, trace.story, trace.source)
        agents_from[how] = agents_from.get(how, 0) + 1
        if agents is None:
            unknown += 1
        elif not agents:
            reality += 1
        else:
            mention.setdefault(trace.step, []).append(mentions_every_agent(reasoning, agents))
    notes = []
    if unknown:
        notes.append(f"{unknown} rollouts have no known question (their id is not in data/train.jsonl, or the question "
                     "names no agent of a parseable story), so they count for the self-reflection share only")
    if reality:
        notes.append(f"{reality} rollouts answer reality questions (no agent asked) and count for the self-reflection "
                     "share only")

    def counts(by_step: dict[float, list[bool]]) -> list[StepShare]:
        return [StepShare(step, sum(flags), len(flags)) for step, flags in sorted(by_step.items())]

    return TraceShares(counts(mention), counts(reflection), agents_from, notes)
