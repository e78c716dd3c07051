"""Turn Hi-ToM and ToMi story and question text into world events and queries.

    from tomrl.world.parsers import parse_hitom_story, parse_tomi_story, parse_question, answer_question
    events = parse_hitom_story(row["story"])                # list[Event]
    query = parse_question("Where does Anna think Ben thinks the apple is?")
    # Query(chain=("Anna", "Ben"), obj="apple", kind="belief")
    answer_question(row["story"], row["question"], style="hitom")   # -> "green_drawer"

The parsers read the sentence forms of the official releases (and of tomrl's generators, which
write the same forms, see :mod:`tomrl.world.sentences`):

Hi-ToM (one numbered sentence per line; "***", blank and instruction lines are ignored)::

    Avery, Charlotte and Owen entered the living_room.       Enter
    The lettuce is in the green_drawer.                      ObjectLocation
    Avery moved the lettuce to the green_bathtub.            Move
    Avery exited the living_room.                            Exit
    Isabella made no movements and stayed in the living_room for 1 minute.   Stay
    Emily publicly claimed that peas is in the blue_suitcase.                PublicClaim
    Isabella privately told Logan that the peas is in the green_bottle.      PrivateTell
    Owen likes the green_envelope. / Noah lost his gloves. / Jack saw a cat. Distractor

ToMi (one sentence per line, one agent per "entered"; distractors "X likes/dislikes/loves/hates
the Y" have no final period). Questions::

    Where is the O really?                                   reality
    Where was the O at the beginning?                        memory (ToMi)
    Where does A really think the O is?                      (A,)        Hi-ToM order 1
    Where does A think B thinks [C thinks [D thinks]] the O is?   (A, B, …) Hi-ToM orders 2-4
    Where will A look for the O?                             (A,)        ToMi first order
    Where does A think that B searches for the O?            (A, B)      ToMi second order

A sentence that matches no form raises ``ValueError`` naming the line, so a changed data format
cannot silently produce wrong labels. The story's world (which container stands in which room,
where each object starts) is inferred from the events (:meth:`tomrl.world.world.WorldSetup.infer`).
``answer_question`` uses the oracle's ``"joint"`` semantics by default, which Hi-ToM's CoT-prompt
labels and ToMi's labels follow; Hi-ToM's vanilla-prompt (VP) labels follow ``"ordered"``.
"""

from __future__ import annotations

import re

from tomrl.world.oracle import BeliefOracle, Semantics
from tomrl.world.world import (
    Distractor,
    Enter,
    Event,
    Exit,
    Move,
    ObjectLocation,
    PrivateTell,
    PublicClaim,
    Query,
    Stay,
)
from tomrl.world.sentences import Style

_NAME = r"[A-Z][A-Za-z]*"
_THING = r"[A-Za-z_][A-Za-z0-9_]*"

_LINE_NUMBER = re.compile(r"^\s*\d+\s+")
# Hi-ToM's vanilla-prompt rows carry the instruction inside the story; it is not a sentence of it.
_INSTRUCTION_PREFIXES = ("Read the following story", "Story:", "Note:")
_SENTENCES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(rf"^(?P<agents>{_NAME}(?:, {_NAME})*(?: and {_NAME})?) entered the (?P<room>{_THING})\.?$"), "enter"),
    (re.compile(rf"^(?P<agent>{_NAME}) (?:exited|left|went out of) the (?P<room>{_THING})\.?$"), "exit"),
    (re.compile(rf"^The (?P<obj>{_THING}) (?:is|are) in the (?P<container>{_THING})\.?$"), "location"),
    (re.compile(rf"^(?P<agent>{_NAME}) moved the (?P<obj>{_THING}) to the (?P<container>{_THING})\.?$"), "move"),
    (
        re.compile(rf"^(?P<agent>{_NAME}) made no movements? and stayed in the (?P<room>{_THING}) for \d+ minutes?\.?$"),
        "stay",
    ),
    (
        re.compile(
            rf"^(?P<speaker>{_NAME}) publicly claimed that (?:the )?(?P<obj>{_THING}) (?:is|are) in the (?P<container>{_THING})\.?$"
        ),
        "claim",
    ),
    (
        re.compile(
            rf"^(?P<speaker>{_NAME}) privately told (?P<listener>{_NAME}) that (?:the )?(?P<obj>{_THING}) (?:is|are) in the (?P<container>{_THING})\.?$"
        ),
        "tell",
    ),
    (re.compile(rf"^{_NAME} (?:likes|dislikes|loves|hates) the {_THING}\.?$"), "distractor"),
    (re.compile(rf"^{_NAME} saw an? [a-z_]+\.?$"), "distractor"),
    (re.compile(rf"^{_NAME} lost (?:his|her|their) [a-z_]+\.?$"), "distractor"),
]


def _split_agents(text: str) -> tuple[str, ...]:
    head, _, last = text.rpartition(" and ")
    names = [n.strip() for n in head.split(",")] + [last] if head else [text]
    return tuple(n for n in names if n)


def parse_sentence(sentence: str) -> Event:
    """One story sentence (without its line number) as an event; ``ValueError`` if unknown."""
    text = sentence.strip()
    for pattern, kind in _SENTENCES:
        match = pattern.match(text)
        if match is None:
            continue
        g = match.groupdict()
        if kind == "enter":
            return Enter(_split_agents(g["agents"]), g["room"])
        if kind == "exit":
            return Exit(g["agent"], g["room"])
        if kind == "location":
            return ObjectLocation(g["obj"], g["container"])
        if kind == "move":
            return Move(g["agent"], g["obj"], g["container"])
        if kind == "stay":
            return Stay(g["agent"], g["room"])
        if kind == "claim":
            return PublicClaim(g["speaker"], g["obj"], g["container"])
        if kind == "tell":
            return PrivateTell(g["speaker"], g["listener"], g["obj"], g["container"])
        return Distractor(text)
    raise ValueError(f"unrecognised story sentence: {sentence!r}")


def story_lines(text: str) -> list[str]:
    """The sentences of a story: line numbers stripped, blank and ``***`` lines dropped."""
    lines = []
    for raw in text.splitlines():
        line = _LINE_NUMBER.sub("", raw).strip()
        if not line or set(line) <= {"*"} or line.startswith(_INSTRUCTION_PREFIXES):
            continue
        lines.append(line)
    return lines


def _parse_story(text: str) -> list[Event]:
    events = []
    for number, line in enumerate(story_lines(text), start=1):
        try:
            events.append(parse_sentence(line))
        except ValueError:
            raise ValueError(f"story sentence {number}: unrecognised: {line!r}") from None
    return events


def parse_hitom_story(text: str) -> list[Event]:
    """Events of a Hi-ToM story (numbered lines, as in the release or ``tomrl data generate hitom``)."""
    return _parse_story(text)


def parse_tomi_story(text: str) -> list[Event]:
    """Events of a ToMi story (one sentence per line, optionally numbered)."""
    return _parse_story(text)


_QUESTIONS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(rf"^Where is the (?P<obj>{_THING}) really\?$"), "reality"),
    (re.compile(rf"^Where was the (?P<obj>{_THING}) at the beginning\?$"), "memory"),
    (re.compile(rf"^Where does (?P<a>{_NAME}) really think the (?P<obj>{_THING}) is\?$"), "belief"),
    (re.compile(rf"^Where will (?P<a>{_NAME}) look for the (?P<obj>{_THING})\?$"), "belief"),
    (
        re.compile(rf"^Where does (?P<a>{_NAME}) think that (?P<b>{_NAME}) searches for the (?P<obj>{_THING})\?$"),
        "belief",
    ),
    (
        re.compile(rf"^Where does (?P<a>{_NAME}) think (?P<rest>(?:{_NAME} thinks )+)the (?P<obj>{_THING}) is\?$"),
        "belief",
    ),
]


def parse_question(text: str) -> Query:
    """A Hi-ToM or ToMi question as a :class:`Query`; ``ValueError`` if its form is unknown."""
    question = text.strip()
    if question.lower().startswith("question:"):
        question = question.split(":", 1)[1].strip()
    for pattern, kind in _QUESTIONS:
        match = pattern.match(question)
        if match is None:
            continue
        g = match.groupdict()
        if kind != "belief":
            return Query((), g["obj"], kind)  # type: ignore[arg-type]
        chain = [g["a"]]
        if g.get("b"):
            chain.append(g["b"])
        if g.get("rest"):
            chain.extend(re.findall(rf"({_NAME}) thinks", g["rest"]))
        return Query(tuple(chain), g["obj"], "belief")
    raise ValueError(f"unrecognised question: {text!r}")


def parse_story(text: str, style: Style) -> list[Event]:
    if style == "hitom":
        return parse_hitom_story(text)
    if style == "tomi":
        return parse_tomi_story(text)
    raise ValueError(f"style must be 'hitom' or 'tomi', got {style!r}")


def answer_question(story_text: str, question_text: str, style: Style, semantics: Semantics = "joint") -> str:
    """The oracle's answer to a question about a story, both given as text.

    ``semantics``: ``"joint"`` (Hi-ToM CoT-prompt labels, ToMi) or ``"ordered"`` (Hi-ToM VP
    labels); see :mod:`tomrl.world.oracle`.

    Raises ``ValueError`` when the text cannot be parsed or the story gives no answer (e.g. the
    asked agents never saw the object).
    """
    events = parse_story(story_text, style)
    query = parse_question(question_text)
    oracle = BeliefOracle(events, semantics=semantics)
    result = oracle.answer(query)
    if result is None:
        raise ValueError(f"the story does not determine an answer to {question_text!r}")
    return result
