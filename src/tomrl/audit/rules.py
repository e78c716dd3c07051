"""Agent-agnostic shortcut rules: answers read off the order of events, and a search for the best one.

    from tomrl.audit.rules import best_rules, BestRule, RULE_FAMILY
    result = best_rules(examples)          # {"0": BestRule, ..., "4": BestRule, "all": BestRule}
    print(result["4"].rule, result["4"].accuracy.format(), result["4"].chance, result["4"].flagged)

    tomrl data audit --test tomrl-paper-hitom600      # prints the best rule per data set and order

A rule here never tracks a belief and never reads which agents a question names: it sees the
parsed story (:func:`tomrl.audit.heuristics.parse_story`), the object asked about and whether the
question wants a room or a container, and answers from the order of events alone. If the best
such rule answers far above chance, a model can score well on that data without Theory of Mind.
Every rule is a pure function of the asked object's :class:`Timeline`:

- ``path_start_k`` / ``path_end_k``: the k-th place (1-based) of the object's *path* — the true
  places it occupies, consecutive repeats removed — counted from the start or from the end
  (``path_end_1`` is where it really is at the end, ``path_start_1`` where it starts);
- ``said_start_k`` / ``said_end_k``: the same over every location *statement* about the object
  (placements, moves, public claims and private tells);
- ``exit_start_j`` / ``exit_end_j``: where the object really was right after the story's j-th
  exit event (any agent, any room), counted from the start or the end;
- ``room_exit_start_j`` / ``room_exit_end_j``: the same, counting only exits from the room the
  object was in at that moment (its own chapter's exits);
- ``enter_start_j`` / ``enter_end_j``: where it was right after the j-th "entered" event;
- ``most_named`` / ``least_named``: the place of the object's path named most / least often in
  the story text (ties: the earliest in the path);
- ``first_moved_to``, ``first_named``, ``last_named``, ``most_named_in_story``: the ideas of
  :mod:`tomrl.audit.heuristics` (the first container the object is moved or privately said to;
  the story's location named first / last / most often), without reading agents.

k and j run from 1 to :data:`MAX_POSITION`. A rule with no answer (a path shorter than k) returns
``None``, which counts as wrong.

The search (:func:`best_rules`) scores every rule with the shared strict matcher
(:func:`tomrl.audit.heuristics.answers_match`, as models are scored) on each order's location
questions and keeps the best (ties: the earlier rule of :data:`RULE_FAMILY`); ``"all"`` answers
each question with the best rule of its order. **Chance** is the expected accuracy of a uniform
random pick among the distinct places the object has really been in (its path; a gold outside
the path, e.g. a claimed container it never entered, contributes 0; a question whose object is
not found falls back to every location of the story). Picking the best of 66 rules in-sample is
optimistic, so each result also carries ``cross_validated``: the rule selected on the
even-indexed questions of the group, scored on the odd-indexed ones. A rule is ``flagged`` when
its in-sample margin over chance exceeds :data:`FLAG_MARGIN` (10 points).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from tomrl.audit.heuristics import StoryFacts, _place_of, _walk, is_location_question, normalise_answer, parsed, read_question
from tomrl.schema import Example
from tomrl.stats import Accuracy, accuracy

MAX_POSITION = 6
FLAG_MARGIN = 0.10


@dataclass(frozen=True)
class Timeline:
    """What an agent-agnostic rule may see about one object of one story."""

    path: tuple[str, ...]  # true places of the object over time, consecutive repeats removed
    said: tuple[str, ...]  # every location statement about it (place, move, claim, tell), consecutive repeats removed
    at_exit: tuple[str | None, ...]  # true place right after each exit event
    at_room_exit: tuple[str | None, ...]  # the same, exits from the object's current room only
    at_enter: tuple[str | None, ...]  # true place right after each enter event
    first_moved_to: str | None  # first container it is moved or privately said to
    story_locations: tuple[str, ...]  # the story's locations of the asked kind, in order of first mention
    last_named: str | None  # the location (of the asked kind) named last in the story
    text_counts: dict[str, int] = field(default_factory=dict)  # location -> times named in the story text


def _dedup(items: Iterable[str | None]) -> tuple[str, ...]:
    out: list[str] = []
    for item in items:
        if item and (not out or out[-1] != item):
            out.append(item)
    return tuple(out)


def _count(text: str, name: str) -> int:
    return len(re.findall(rf"\b{re.escape(name.lower())}\b", text))


def timeline(facts: StoryFacts, thing: str | None, asks_room: bool) -> Timeline:
    """The :class:`Timeline` of ``thing`` (the object, or a container for room questions)."""
    places: list[str | None] = []
    said: list[str | None] = []
    at_exit: list[str | None] = []
    at_room_exit: list[str | None] = []
    at_enter: list[str | None] = []
    first_moved_to = None
    last_named = None
    for e, where, container_room in _walk(facts):
        place = _place_of(thing, asks_room, where, container_room, facts.rooms) if thing else None
        if thing and e.thing == thing:
            if e.kind in ("place", "move"):
                places.append(place)
                said.append(place)
            elif e.kind == "claim":
                said.append(e.location if not asks_room else container_room.get(e.location or ""))
            if first_moved_to is None and not asks_room and ((e.kind == "move" and not e.to_room) or (e.kind == "claim" and not e.public)):
                first_moved_to = e.location
            if first_moved_to is None and asks_room and e.kind == "move" and e.to_room:
                first_moved_to = e.location
        elif thing and asks_room and e.kind == "enter" and place is not None and not places:
            places.append(place)  # a one-room story: the room is known from the first "entered"
        if e.kind == "exit":
            at_exit.append(place)
            thing_room = where[thing].room if thing in where else container_room.get(thing or "")
            if thing_room is None or thing_room == e.room:
                at_room_exit.append(place)
        elif e.kind == "enter":
            at_enter.append(place)
        if asks_room:
            last_named = (e.location if (e.kind == "move" and e.to_room) else e.room) or last_named
        elif e.kind in ("place", "claim") or (e.kind == "move" and not e.to_room):
            last_named = e.location
    locations = tuple(facts.rooms if asks_room else facts.containers)
    text = facts.text.lower()
    counts = {loc: _count(text, loc) for loc in set(locations) | set(places) - {None}}
    return Timeline(_dedup(places), _dedup(said), tuple(at_exit), tuple(at_room_exit), tuple(at_enter),
                    first_moved_to, locations, last_named, counts)


# ------------------------------------------------------------------------------- the family

Rule = Callable[[Timeline], "str | None"]


def _nth(items: tuple, k: int, from_end: bool):
    if k > len(items):
        return None
    return items[-k] if from_end else items[k - 1]


def _positional(attribute: str, k: int, from_end: bool) -> Rule:
    def rule(t: Timeline) -> str | None:
        return _nth(getattr(t, attribute), k, from_end)

    return rule


def _named(t: Timeline, most: bool) -> str | None:
    distinct = list(dict.fromkeys(t.path))
    if not distinct:
        return None
    key = [t.text_counts.get(p, 0) for p in distinct]
    best = max(key) if most else min(key)
    return distinct[key.index(best)]


def _most_named_in_story(t: Timeline) -> str | None:
    if not t.story_locations:
        return None
    counts = [t.text_counts.get(loc, 0) for loc in t.story_locations]
    return t.story_locations[counts.index(max(counts))]


def _family() -> dict[str, Rule]:
    family: dict[str, Rule] = {}
    for prefix, attribute in (("path", "path"), ("said", "said"), ("exit", "at_exit"), ("room_exit", "at_room_exit"), ("enter", "at_enter")):
        for k in range(1, MAX_POSITION + 1):
            family[f"{prefix}_start_{k}"] = _positional(attribute, k, False)
            family[f"{prefix}_end_{k}"] = _positional(attribute, k, True)
    family["most_named"] = lambda t: _named(t, True)
    family["least_named"] = lambda t: _named(t, False)
    family["first_moved_to"] = lambda t: t.first_moved_to
    family["first_named"] = lambda t: t.story_locations[0] if t.story_locations else None
    family["last_named"] = lambda t: t.last_named
    family["most_named_in_story"] = _most_named_in_story
    return family


# name -> rule(Timeline) -> answer or None; see the module docstring for each kind.
RULE_FAMILY: dict[str, Rule] = _family()


@functools.lru_cache(maxsize=8192)
def _cached_answers(story: str, thing: str | None, asks_room: bool) -> tuple[tuple[str | None, ...], tuple[str, ...], int]:
    """Every rule's answer, the places a random pick chooses among, and how many places the object has been in."""
    t = timeline(parsed(story), thing, asks_room)
    places = tuple(dict.fromkeys(t.path))
    return tuple(rule(t) for rule in RULE_FAMILY.values()), places or t.story_locations, len(places)


@functools.lru_cache(maxsize=65536)
def _normalised(answer: str | None) -> str:
    """The shared strict normaliser; "" for no answer (which never matches, as in answers_match)."""
    return normalise_answer(answer) if answer is not None and answer.strip() else ""


@functools.lru_cache(maxsize=8192)
def _normalised_answers(story: str, thing: str | None, asks_room: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    values, candidates, _ = _cached_answers(story, thing, asks_room)
    return tuple(_normalised(v) for v in values), tuple(_normalised(c) for c in candidates)


def rule_hits(story: str, question: str, gold: str) -> tuple[tuple[bool, ...], float]:
    """Whether each rule of :data:`RULE_FAMILY` answers right (the shared strict matcher,
    :func:`tomrl.audit.heuristics.answers_match`), and the chance of a random pick."""
    info = read_question(parsed(story), question)
    values, candidates = _normalised_answers(story, info.thing, info.asks_room)
    target = _normalised(gold)
    hits = tuple(bool(v) and v == target for v in values)
    return hits, (sum(bool(c) and c == target for c in candidates) / len(candidates) if candidates else 0.0)


def places_of_object(story: str, question: str) -> int:
    """How many distinct places the asked object has really been in."""
    info = read_question(parsed(story), question)
    return _cached_answers(story, info.thing, info.asks_room)[2]


def rule_answers(story: str, question: str) -> dict[str, str | None] | None:
    """Every rule's answer to a question (``None`` if it does not ask for a location)."""
    if not is_location_question(question):
        return None
    info = read_question(parsed(story), question)
    values = _cached_answers(story, info.thing, info.asks_room)[0]
    return dict(zip(RULE_FAMILY, values))


def chance_of(story: str, question: str, gold: str) -> float:
    """Expected accuracy of a uniform pick among the places the object has been in (see module docstring)."""
    return rule_hits(story, question, gold)[1]


# ------------------------------------------------------------------------------- the search


@dataclass(frozen=True)
class BestRule:
    """The best agent-agnostic rule on one group of location questions."""

    rule: str  # rule name ("by order" for the combined result)
    accuracy: Accuracy
    chance: float  # mean expected accuracy of a random pick among the object's places (0-1)
    n: int
    margin: float  # accuracy.value - chance, 0-1
    flagged: bool  # margin > FLAG_MARGIN
    cross_validated: Accuracy | None  # selected on even-indexed questions, scored on odd-indexed ones
    answers: dict[str, str | None] = field(default_factory=dict, repr=False)  # example id -> the rule's answer

    def to_dict(self) -> dict:
        return {
            "rule": self.rule,
            "accuracy": self.accuracy.to_dict(),
            "chance": self.chance,
            "n": self.n,
            "margin": self.margin,
            "flagged": self.flagged,
            "cross_validated": self.cross_validated.to_dict() if self.cross_validated else None,
        }


@dataclass
class _Scored:
    """Per question: every rule's answer and hit, and the chance of a random pick."""

    ids: list[str]
    answers: list[tuple[str | None, ...]]
    hits: list[tuple[bool, ...]]
    chances: list[float]


def _score(examples: list[Example]) -> _Scored:
    scored = _Scored([], [], [], [])
    for e in examples:
        info = read_question(parsed(e.story), e.question)
        hits, chance = rule_hits(e.story, e.question, e.answer)
        scored.ids.append(e.id)
        scored.answers.append(_cached_answers(e.story, info.thing, info.asks_room)[0])
        scored.hits.append(hits)
        scored.chances.append(chance)
    return scored


# Choosing among candidate answerers (rules here, learners in tomrl.audit.learner) on one group of questions:
# ``hits[question][candidate]`` says whether each candidate answered each question right.


def most_hits(hits: Sequence[Sequence[bool]]) -> int:
    """Index of the candidate with the most hits (the earliest among ties; 0 without questions)."""
    if not hits:
        return 0
    totals = [sum(column) for column in zip(*hits)]
    return totals.index(max(totals))


def held_out_hits(hits: Sequence[Sequence[bool]]) -> list[bool]:
    """The candidate chosen on the even-indexed questions, scored on the odd-indexed ones."""
    if len(hits) < 2:
        return []
    chosen = most_hits(hits[0::2])
    return [row[chosen] for row in hits[1::2]]


def best_result(name: str, correct: list[bool], chances: list[float], held_out: list[bool], answers: dict[str, str | None]) -> BestRule:
    """The :class:`BestRule` of a chosen candidate: accuracy, mean chance, margin, FLAG and held-out check."""
    acc = accuracy(correct)
    chance = sum(chances) / len(chances) if chances else 0.0
    margin = acc.value - chance
    return BestRule(name, acc, chance, acc.n, margin, margin > FLAG_MARGIN, accuracy(held_out) if held_out else None, answers)


def best_rules(examples: Iterable[Example]) -> dict[str, BestRule]:
    """The best rule per order (keys ``str(order)``, ``"None"`` for rows without one) and ``"all"``.

    Only location questions are scored (:func:`tomrl.audit.heuristics.is_location_question`);
    ``"all"`` answers each question with the best rule of its order (its cross-validated
    accuracy selects per order on even-indexed questions and pools the odd-indexed ones).
    """
    groups: dict[int | None, list[Example]] = {}
    for e in examples:
        if is_location_question(e.question):
            groups.setdefault(e.order, []).append(e)
    names = list(RULE_FAMILY)
    result: dict[str, BestRule] = {}
    combined_correct: list[bool] = []
    combined_chances: list[float] = []
    combined_held_out: list[bool] = []
    combined_answers: dict[str, str | None] = {}
    for order in sorted(groups, key=lambda o: -1 if o is None else o):
        scored = _score(groups[order])
        chosen = most_hits(scored.hits)
        correct = [row[chosen] for row in scored.hits]
        held_out = held_out_hits(scored.hits)
        answers = {i: values[chosen] for i, values in zip(scored.ids, scored.answers)}
        result[str(order)] = best_result(names[chosen], correct, scored.chances, held_out, answers)
        combined_correct += correct
        combined_chances += scored.chances
        combined_held_out += held_out
        combined_answers.update(answers)
    if groups:
        result["all"] = best_result("by order", combined_correct, combined_chances, combined_held_out, combined_answers)
    return result


def best_rules_by_source(examples: Iterable[Example]) -> dict[str, dict[str, BestRule]]:
    """:func:`best_rules` for each data set (``Example.source``) separately."""
    by_source: dict[str, list[Example]] = {}
    for e in examples:
        by_source.setdefault(e.source, []).append(e)
    return {source: best_rules(rows) for source, rows in sorted(by_source.items())}

