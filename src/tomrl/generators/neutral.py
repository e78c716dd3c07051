"""Shortcut-neutral generation: pick stories and questions so that no agent-agnostic rule beats chance.

    tomrl data generate hitom --config configs/generate/hitom_neutral_test.yaml --n 600 --seed 7 --out test.jsonl
    tomrl data audit --test test.jsonl        # "Best agent-agnostic rule": no FLAG on orders >= 1

With ``shortcut_neutral: true`` (:class:`tomrl.generators.config.GenerateConfig`) every question
slot (one question per story) is filled greedily: :data:`STORY_CANDIDATES` stories are drawn, each
with up to :data:`CHAIN_CANDIDATES` questions of the slot's order (Hi-ToM: agent chains; ToMi:
the question type asked of either main agent), every candidate is labelled by the belief oracle,
and the one kept is the one after which the worst margin of any rule of
:data:`tomrl.audit.rules.RULE_FAMILY` over chance, on the questions of that order kept so far, is
smallest (then the sum of squared positive margins; ties: the first candidate). The margins are
exactly those ``tomrl data audit`` reports, so the audit of the output is what was balanced.

Only candidates whose object has been in at least two places qualify (otherwise every rule and
chance are trivially right and the greedy pick would drift to stories where nothing moves). Order 0
(and ToMi's memory questions) is not balanced: where the object really is (or first was) is its
last (or first) place by definition, so a rule always answers it; the first candidate is kept.
Labels are still the oracle's and are re-derived from the text by :mod:`tomrl.generators.dataset`.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from typing import Callable

from tomrl.audit.rules import RULE_FAMILY, places_of_object, rule_hits
from tomrl.generators.splits import story_id_for
from tomrl.world.oracle import BeliefOracle
from tomrl.world.sentences import render_question, render_story
from tomrl.world.world import Query

STORY_CANDIDATES = {0: 1, 1: 8, 2: 8, 3: 16, 4: 24}  # stories drawn per slot, by order: higher orders need more to balance
CHAIN_CANDIDATES = 12
REVISIT_PROB = 0.5  # Hi-ToM: chance that a later chapter moves the asked object again (hitom.build_story)


@dataclass
class Candidate:
    """One (story, question) the greedy pick can keep."""

    story: object
    text: str
    story_id: str
    query: object
    question: str
    answer: str
    hits: tuple[bool, ...] = ()
    chance: float = 0.0


@dataclass
class RuleBalance:
    """Running hits of every rule and the summed chance, per order, of the questions kept so far."""

    hits: dict[int, list[int]] = field(default_factory=dict)
    chance: dict[int, float] = field(default_factory=dict)
    count: dict[int, int] = field(default_factory=dict)

    def score(self, candidate: Candidate) -> None:
        candidate.hits, candidate.chance = rule_hits(candidate.text, candidate.question, candidate.answer)

    def cost(self, order: int, candidate: Candidate) -> tuple[float, float]:
        hits = self.hits.get(order, [0] * len(RULE_FAMILY))
        n = self.count.get(order, 0) + 1
        chance = (self.chance.get(order, 0.0) + candidate.chance) / n
        margins = [(h + c) / n - chance for h, c in zip(hits, candidate.hits)]
        return max(margins), sum(m * m for m in margins if m > 0)

    def add(self, order: int, candidate: Candidate) -> None:
        hits = self.hits.setdefault(order, [0] * len(RULE_FAMILY))
        for i, hit in enumerate(candidate.hits):
            hits[i] += hit
        self.chance[order] = self.chance.get(order, 0.0) + candidate.chance
        self.count[order] = self.count.get(order, 0) + 1

    def choose(self, order: int, candidates: list[Candidate], balance: bool = True) -> Candidate:
        """The candidate to keep (see the module docstring); ``balance=False`` keeps the first."""
        if not candidates:
            raise ValueError("no candidate story could be drawn (all repeated or excluded stories)")
        if balance:
            moving = [c for c in candidates if places_of_object(c.text, c.question) >= 2]
            pool = moving or candidates
            for c in pool:
                self.score(c)
            best = min(range(len(pool)), key=lambda i: (self.cost(order, pool[i]), i))
            chosen = pool[best]
        else:
            chosen = candidates[0]
            self.score(chosen)
        self.add(order, chosen)
        return chosen


def _stories(source: str, style: str, seed: int, index: int, build: Callable[[random.Random], object], seen: set[str], count: int):
    """Up to ``count`` new stories for slot ``index``: ``(attempt, story, text, story_id)``."""
    drawn = 0
    for attempt in range(count * 10):
        story = build(random.Random(f"{source}-neutral:{seed}:{index}:{attempt}"))
        text = render_story(story.events, style)  # type: ignore[attr-defined]
        story_id = story_id_for(source, text)
        if story_id in seen or text in seen:
            continue
        yield attempt, story, text, story_id
        drawn += 1
        if drawn == count:
            return


def _keep(chosen: Candidate, seen: set[str]) -> Candidate:
    seen.add(chosen.story_id)
    return chosen


def draw_hitom(cfg, source: str, index: int, build, order: int, seen: set[str], balance: RuleBalance) -> Candidate:
    """The kept (story, question) of a Hi-ToM slot of ``order`` (see the module docstring)."""
    candidates: list[Candidate] = []
    for attempt, story, text, story_id in _stories(source, "hitom", cfg.seed, index, build, seen, STORY_CANDIDATES[order]):
        oracle = BeliefOracle(story.events, story.setup, cfg.semantics)
        if order == 0:
            queries = [Query((), story.target, "reality")]
        else:
            chains = list(itertools.permutations(story.agents, order))
            random.Random(f"{source}-neutral-chains:{cfg.seed}:{index}:{attempt}").shuffle(chains)
            queries = [Query(chain, story.target, "belief") for chain in chains[:CHAIN_CANDIDATES]]
        for query in queries:
            answer = oracle.answer(query)
            if answer is not None:
                candidates.append(Candidate(story, text, story_id, query, render_question(query, "hitom"), answer))
    return _keep(balance.choose(order, candidates, balance=order > 0), seen)


def draw_tomi(cfg, source: str, index: int, build, question_type: str, slots, seen: set[str], balance: RuleBalance) -> Candidate:
    """The kept (story, question) of a ToMi slot of ``question_type``: the question asked of either main agent."""
    from tomrl.generators.tomi import slot_query

    same_type = [s for s in slots if s[0] == question_type]
    order = len(same_type[0][1])
    candidates: list[Candidate] = []
    for _, story, text, story_id in _stories(source, "tomi", cfg.seed, index, build, seen, STORY_CANDIDATES[order]):
        oracle = BeliefOracle(story.events, story.setup, cfg.semantics)
        for slot in same_type:
            query = slot_query(story, slot)
            answer = oracle.answer(query)
            if answer is not None:
                candidates.append(Candidate(story, text, story_id, query, render_question(query, "tomi"), answer))
    return _keep(balance.choose(order, candidates, balance=order > 0), seen)
