"""Answer heuristics that need no Theory of Mind, and the small story parser they share.

    from tomrl.audit.heuristics import RULES, HEURISTICS, parse_story, answers_match
    facts = parse_story("The apple is in the red_box.\\nAnna moved the apple to the blue_crate.")
    RULES["true_location"](facts, "Where is the apple really?")          # "blue_crate"
    HEURISTICS["first_location"](example)                                 # the same, on an Example

A heuristic sees the story and the question and returns an answer (or ``None`` when it has
none); it never tracks what anyone believes. If a heuristic answers a data set's questions well,
that data set can be solved without ToM, at least partly. ``tomrl data audit`` reports each one's
accuracy per data set and order (:mod:`tomrl.audit.report`).

The parser reads the sentence forms of Hi-ToM, ToMi and ExploreToM's structured stories, with
sentences on separate lines or joined by spaces (as in the ToM-RL release), ToMi's noise sentences
without a final period included::

    A, B and C entered the R.            A exited the R. / A left the R.
    The O is in the C.                   A moved the O to the C[, which is also located in the R].
    A moved the O to the R, leaving the C in its original location.     (ExploreToM: to another room)
    A publicly claimed that [the] O is in the C.     A privately told B that the O is in the C[ now].
    A told privately to B that the O is in the C.    A told out loud that the O is in the C.

Anything else (distractors, narrative prose) is ignored. Questions are read loosely: the thing
asked about is the longest object or container of the story named in the question, the agents
are the story's agents it names (the first one is "the asked agent"), and a question saying
"which room" asks for a room, any other location question for a container.

Heuristics: :data:`RULES` holds them as pure functions of ``(StoryFacts, question)``;
:data:`HEURISTICS` holds the same ones as functions of an :class:`~tomrl.schema.Example`
(``None`` for questions that do not ask for a location)::

    HEURISTICS["first_location"](example)   # -> "green_drawer" or None

- ``last_mentioned``: the location (container, or room for room questions) named last in the story.
- ``first_mentioned``: the location named first.
- ``first_location``: the first place the story puts the object *after* its initial position: the
  first container it is moved to, or that a character privately tells someone it is in (public
  claims are not counted). ``None`` if neither happens. On Hi-ToM 600 (CoT-prompt labels) this is
  right on 15.8 / 30.8 / 34.2 / 43.3 / 43.3 % of orders 0-4, the figure in MISSION.md; counting
  public claims too gives 15.8 / 30.8 / 35.8 / 42.5 / 42.5 %.
- ``true_location``: where the thing really is at the end (moves tracked, claims ignored).
- ``exit_location``: where the thing was when the asked agent last left the room it was in
  (the true location if the agent never left it, or if the question names no agent).
- ``most_mentioned``: the location named most often in the story text (ties: the earliest named).
- ``random_location``: a location of the story drawn uniformly (seeded per question);
  :func:`random_expected_hit` gives its exact expected accuracy.
"""

from __future__ import annotations

from tomrl.rewards.answer import answers_match as strict_answers_match
from tomrl.rewards.answer import normalize

import functools
import hashlib
import random
import re
from dataclasses import dataclass, field
from typing import Callable, Literal

from tomrl.schema import Example
from tomrl.stats import Accuracy, accuracy

_NAME = r"[A-Z][a-z]+(?:-[A-Z][a-z]+)?"
_PHRASE = r"[\w'’-]+(?: [\w'’-]+)*?"
_END = r"(?=\.|,|$|\n)"

_EVENT = re.compile(
    "|".join(
        (
            rf"(?P<enter_agents>{_NAME}(?:, {_NAME})*(?:,? and {_NAME})?) entered the (?P<enter_room>{_PHRASE}){_END}",
            rf"(?P<exit_agent>{_NAME}) (?:exited|left) the (?P<exit_room>{_PHRASE}){_END}",
            rf"(?P<claim_speaker>{_NAME}) (?:(?P<public>publicly claimed|told out loud)|privately told (?P<listener_a>{_NAME})|told privately to "
            rf"(?P<listener_b>{_NAME})) that (?:the )?(?P<claim_obj>[^.\n]+?) (?:is|are) in the (?P<claim_loc>{_PHRASE})(?: now)?{_END}",
            rf"(?P<move_agent>{_NAME}) moved the (?P<move_obj>[^.\n]+?) to the (?P<move_dest>{_PHRASE})"
            rf"(?:, which is also located in the (?P<move_room>[^.\n]+?)|, leaving the (?P<move_left>[^.\n]+?) in its original location)?{_END}",
            rf"(?<!that )\b[Tt]he (?P<place_obj>[^.\n]+?) (?:is|are) in the (?P<place_loc>{_PHRASE}){_END}",
        )
    )
)


@dataclass(frozen=True)
class Event:
    kind: Literal["enter", "exit", "place", "move", "claim"]
    agents: tuple[str, ...] = ()  # enter: who; exit/move/claim: the actor (and the listener of a private tell)
    thing: str | None = None  # the object placed, moved or claimed about
    location: str | None = None  # container (or room, for a move to another room)
    room: str | None = None  # enter/exit: the room; place/move: the room of the container when stated
    to_room: bool = False  # move: the object went to another room (ExploreToM), not into a container
    public: bool = False  # claim: public (heard by all) rather than private


@dataclass
class StoryFacts:
    """The events of a story, and what a reader without ToM can see in them."""

    text: str
    events: list[Event]
    agents: list[str] = field(default_factory=list)
    containers: list[str] = field(default_factory=list)  # in order of first mention
    rooms: list[str] = field(default_factory=list)  # in order of first mention
    things: list[str] = field(default_factory=list)  # objects placed, moved or claimed about


def _add(items: list[str], value: str | None) -> None:
    if value and value not in items:
        items.append(value)


def parse_story(text: str) -> StoryFacts:
    """The story's events in order (see the module docstring for the sentence forms read)."""
    events: list[Event] = []
    for m in _EVENT.finditer(text):
        g = m.groupdict()
        if g["enter_agents"]:
            names = re.split(r",? and |, ", g["enter_agents"])
            events.append(Event("enter", tuple(names), room=g["enter_room"]))
        elif g["exit_agent"]:
            events.append(Event("exit", (g["exit_agent"],), room=g["exit_room"]))
        elif g["claim_speaker"]:
            listener = g["listener_a"] or g["listener_b"]
            agents = (g["claim_speaker"],) + ((listener,) if listener else ())
            events.append(Event("claim", agents, thing=g["claim_obj"], location=g["claim_loc"], public=bool(g["public"])))
        elif g["move_agent"]:
            to_room = g["move_left"] is not None
            events.append(Event("move", (g["move_agent"],), thing=g["move_obj"], location=g["move_dest"], room=g["move_room"], to_room=to_room))
        elif g["place_obj"]:
            events.append(Event("place", thing=g["place_obj"], location=g["place_loc"]))
    facts = StoryFacts(text=text, events=events)
    for e in events:
        for agent in e.agents:
            _add(facts.agents, agent)
        if e.kind in ("enter", "exit"):
            _add(facts.rooms, e.room)
        elif e.kind == "move" and e.to_room:
            _add(facts.rooms, e.location)
            _add(facts.things, e.thing)
        elif e.kind in ("place", "move", "claim"):
            _add(facts.containers, e.location)
            _add(facts.rooms, e.room)
            if e.kind != "claim" or e.thing not in facts.agents:
                _add(facts.things, e.thing)
    return facts


# ------------------------------------------------------------------------------- the question


@dataclass(frozen=True)
class QuestionInfo:
    asks_room: bool  # "which room" questions want a room, others a container
    thing: str | None  # the object (or container, for room questions) asked about
    agents: tuple[str, ...]  # story agents named in the question, in order

    @property
    def asked_agent(self) -> str | None:
        return self.agents[0] if self.agents else None


_LOCATION_QUESTION = re.compile(r"\bwhere\b|\bin which (?:container|room)\b", re.IGNORECASE)


def is_location_question(question: str) -> bool:
    """Whether the question asks where something is (the heuristics only apply to those)."""
    return bool(_LOCATION_QUESTION.search(question)) and "yes or no" not in question.lower()


def read_question(facts: StoryFacts, question: str) -> QuestionInfo:
    asks_room = bool(re.search(r"\bwhich room\b", question, re.IGNORECASE))
    lowered = question.lower()
    candidates = list(facts.things) + (list(facts.containers) if asks_room else [])
    named = [t for t in candidates if re.search(rf"\b{re.escape(t.lower())}\b", lowered)]
    thing = max(named, key=len) if named else None
    positions = []
    for agent in facts.agents:
        match = re.search(rf"\b{re.escape(agent)}\b", question)
        if match:
            positions.append((match.start(), agent))
    return QuestionInfo(asks_room, thing, tuple(a for _, a in sorted(positions)))


# ------------------------------------------------------------------------------ world tracking


@dataclass
class _Where:
    container: str | None = None
    room: str | None = None


def _walk(facts: StoryFacts):
    """Yield ``(event, where)`` after each event: ``where[thing]`` is each thing's true place so far."""
    where: dict[str, _Where] = {}
    container_room: dict[str, str] = {}
    scene: str | None = None  # the room of the latest "entered": where unplaced actions happen
    for e in facts.events:
        if e.kind == "enter":
            scene = e.room
        elif e.kind in ("place", "move") and e.thing:
            if e.to_room:
                where[e.thing] = _Where(None, e.location)
            else:
                room = e.room or container_room.get(e.location or "") or scene
                if room and e.location:
                    container_room.setdefault(e.location, room)
                where[e.thing] = _Where(e.location, container_room.get(e.location or "", room))
        yield e, where, container_room


def _place_of(thing: str, asks_room: bool, where: dict[str, _Where], container_room: dict[str, str], rooms: list[str]) -> str | None:
    if asks_room and len(rooms) == 1:
        return rooms[0]  # a one-room story: whatever is asked about is there
    if thing in where:
        return where[thing].room if asks_room else where[thing].container
    if asks_room and thing in container_room:  # a container asked about: the room it stands in
        return container_room[thing]
    return None


def _candidates(facts: StoryFacts, info: QuestionInfo) -> list[str]:
    return facts.rooms if info.asks_room else facts.containers


# --------------------------------------------------------------------------------- heuristics

Heuristic = Callable[..., "str | None"]  # (facts, question) -> answer


def last_mentioned(facts: StoryFacts, question: str) -> str | None:
    info = read_question(facts, question)
    last = None
    for e in facts.events:
        if info.asks_room:
            named = e.location if (e.kind == "move" and e.to_room) else e.room
            last = named or last
        elif e.kind in ("place", "claim") or (e.kind == "move" and not e.to_room):
            last = e.location
    return last


def first_mentioned(facts: StoryFacts, question: str) -> str | None:
    candidates = _candidates(facts, read_question(facts, question))
    return candidates[0] if candidates else None


def first_location(facts: StoryFacts, question: str) -> str | None:
    info = read_question(facts, question)
    if info.thing is None:
        return None
    for e in facts.events:
        if e.thing != info.thing:
            continue
        if info.asks_room:
            if e.kind == "move" and e.to_room:
                return e.location
        elif (e.kind == "move" and not e.to_room) or (e.kind == "claim" and not e.public):
            return e.location
    return None


def true_location(facts: StoryFacts, question: str) -> str | None:
    info = read_question(facts, question)
    if info.thing is None:
        return facts.rooms[0] if info.asks_room and len(facts.rooms) == 1 else None
    answer = None
    for _, where, container_room in _walk(facts):
        answer = _place_of(info.thing, info.asks_room, where, container_room, facts.rooms)
    return answer


def exit_location(facts: StoryFacts, question: str) -> str | None:
    info = read_question(facts, question)
    if info.thing is None:
        return facts.rooms[0] if info.asks_room and len(facts.rooms) == 1 else None
    agent = info.asked_agent
    seen, final = None, None
    for e, where, container_room in _walk(facts):
        final = _place_of(info.thing, info.asks_room, where, container_room, facts.rooms)
        if agent is not None and e.kind == "exit" and e.agents[0] == agent:
            thing_room = where[info.thing].room if info.thing in where else container_room.get(info.thing)
            if thing_room is None or thing_room == e.room:
                seen = final
    return seen if seen is not None else final


def most_mentioned(facts: StoryFacts, question: str) -> str | None:
    candidates = _candidates(facts, read_question(facts, question))
    if not candidates:
        return None
    text = facts.text.lower()
    counts = [len(re.findall(rf"\b{re.escape(c.lower())}\b", text)) for c in candidates]
    best = max(counts)
    return candidates[counts.index(best)]  # index() picks the earliest named among ties


def random_location(facts: StoryFacts, question: str, key: str = "", seed: int = 0) -> str | None:
    candidates = _candidates(facts, read_question(facts, question))
    if not candidates:
        return None
    digest = hashlib.sha256(f"{seed}:{key}:{question}".encode()).hexdigest()
    return random.Random(digest).choice(candidates)


def random_expected_hit(facts: StoryFacts, question: str, gold: str) -> float:
    """The probability that :func:`random_location` is right (1/|locations| if gold is one of them)."""
    candidates = _candidates(facts, read_question(facts, question))
    if not candidates:
        return 0.0
    hits = sum(1 for c in candidates if answers_match(c, gold))
    return hits / len(candidates)


RULES: dict[str, Heuristic] = {
    "last_mentioned": last_mentioned,
    "first_mentioned": first_mentioned,
    "first_location": first_location,
    "true_location": true_location,
    "exit_location": exit_location,
    "most_mentioned": most_mentioned,
    "random_location": random_location,
}


@functools.lru_cache(maxsize=4096)
def parsed(story: str) -> StoryFacts:
    """:func:`parse_story`, cached: the heuristics of one question share one parse (read-only)."""
    return parse_story(story)


def _on_example(name: str, rule: Heuristic, seed: int = 0) -> Callable[[Example], "str | None"]:
    def heuristic(example: Example) -> str | None:
        if not is_location_question(example.question):
            return None
        facts = parsed(example.story)
        if rule is random_location:
            return random_location(facts, example.question, key=example.id, seed=seed)
        return rule(facts, example.question)

    heuristic.__name__ = name
    heuristic.__doc__ = f"{name} applied to an Example (None for questions that do not ask for a location)."
    return heuristic


# name -> heuristic(example) -> answer or None; the random one draws with seed 0, keyed by the example id.
HEURISTICS: dict[str, Callable[[Example], "str | None"]] = {name: _on_example(name, rule) for name, rule in RULES.items()}

DESCRIPTIONS = {
    "last_mentioned": "location named last in the story",
    "first_mentioned": "location named first in the story",
    "first_location": "first place the object is moved (or privately said) to",
    "true_location": "where the object really is at the end",
    "exit_location": "where it was when the asked agent left",
    "most_mentioned": "location named most often",
    "random_location": "uniform choice among the story's locations",
}


# ------------------------------------------------------------------------------ answer matching


def normalise_answer(text: str) -> str:
    """The shared strict normaliser (tomrl.rewards.answer): heuristics are scored as models are."""
    return normalize(text, "strict")


def answers_match(prediction: str | None, gold: str) -> bool:
    """The shared strict matcher: exact after normalisation, no suffix or substring credit."""
    return strict_answers_match(prediction, gold, "strict")


# ------------------------------------------------------------------------------ the table


@dataclass
class ShortcutRow:
    """Accuracy of every heuristic on one group of location questions (a data set and order)."""

    source: str
    order: int | None
    question_type: str | None  # set when grouped by question type
    n: int  # location questions in the group
    skipped: int  # questions of the group that do not ask for a location (no heuristic applies)
    accuracies: dict[str, Accuracy]
    random_expected: float  # exact expected accuracy of random_location
    gold_in_story: float  # share of questions whose gold location is named in the story

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "order": self.order,
            "question_type": self.question_type,
            "n": self.n,
            "skipped_non_location": self.skipped,
            "heuristics": {name: acc.to_dict() for name, acc in self.accuracies.items()},
            "random_expected": self.random_expected,
            "gold_in_story": self.gold_in_story,
        }


def shortcut_table(examples, by: Literal["order", "question_type"] = "order", seed: int = 0) -> list[ShortcutRow]:
    """Every heuristic's accuracy (with its 95 % Wilson interval) per data set and order (or type)."""
    groups: dict[tuple, list] = {}
    for e in examples:
        key = (e.source, e.order, e.question_type if by == "question_type" else None)
        groups.setdefault(key, []).append(e)
    rows = []
    for (source, order, qtype), members in sorted(groups.items(), key=lambda kv: (kv[0][0], -1 if kv[0][1] is None else kv[0][1], kv[0][2] or "")):
        located = [e for e in members if is_location_question(e.question)]
        hits: dict[str, list[bool]] = {name: [] for name in RULES}
        expected, in_story = 0.0, 0
        for e in located:
            facts = parsed(e.story)
            for name, rule in RULES.items():
                guess = rule(facts, e.question, key=e.id, seed=seed) if rule is random_location else rule(facts, e.question)
                hits[name].append(answers_match(guess, e.answer))
            expected += random_expected_hit(facts, e.question, e.answer)
            info = read_question(facts, e.question)
            in_story += any(answers_match(c, e.answer) for c in (facts.rooms if info.asks_room else facts.containers))
        n = len(located)
        rows.append(
            ShortcutRow(
                source=source,
                order=order,
                question_type=qtype,
                n=n,
                skipped=len(members) - n,
                accuracies={name: accuracy(values) for name, values in hits.items()},
                random_expected=expected / n if n else 0.0,
                gold_in_story=in_story / n if n else 0.0,
            )
        )
    return rows
