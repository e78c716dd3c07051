"""Shortcut-neutral generation: the gold is drawn uniformly among the object's places, after the story.

    tomrl data generate hitom --config configs/generate/hitom_neutral_test.yaml --n 600 --seed 7 --out test.jsonl
    tomrl data audit --test test.jsonl        # agent-agnostic rules, learner and partial-ToM rules near chance

With ``shortcut_neutral: true`` (:class:`tomrl.generators.config.GenerateConfig`) every story is
asked one question, of the slot's order k, built in three steps:

1. **Story.** Stories are drawn one after another (seeded by slot and attempt) until one is
   *complete* for order k: the asked object has really been in m >= 2 distinct places (its
   *path*: the containers it occupies over time, :func:`path_places`), and for every one of them
   some chain of k distinct story agents believes the object is there (the belief oracle,
   :class:`tomrl.world.oracle.BeliefOracle`, under ``semantics``). For k >= 2 and a story kind
   that can need nesting at all (:func:`can_need_nesting`) the story must also let all of its
   places but at most one be asked by a *nesting-required* chain
   (:func:`tomrl.world.partial.nesting_required`: no agent of the chain believes the gold by
   itself); a partial-ToM rule is right on almost every other question, so it needs a nesting
   share near 1 - 1/m to stay at chance. All of this is a property of the story alone.
2. **Gold.** The gold place is the i-th place of the path (in order of first appearance), with
   i taken from a stratified index cycle per (order, m) (:class:`GoldCycle`): seeded shuffles of
   0..m-1, one after another, drawn from a random stream that nothing else reads.
3. **Chain.** Only then is the chain chosen, among the chains of k agents whose belief is the
   gold (:class:`PartialBalance`): for k >= 2 the one that keeps the share of nesting-required
   questions of that order at :attr:`GenerateConfig.neutral_nesting_share` and, after that, every
   partial-ToM rule of :data:`tomrl.world.partial.PARTIAL_RULES` (one agent's first-order belief
   standing in for the nested one) nearest chance; ties and order 1: seeded random.

**Why no agent-blind predictor can beat chance.** Call *agent-blind* any predictor that reads the
story and the question but not which agents the question names: the 66 rules of
:mod:`tomrl.audit.rules`, the learners of :mod:`tomrl.audit.learner`, or anything else, fitted on
any data. It sees the story and the order, and nothing more (the chain's names are the only
other thing in the question). Steps 1 and 2 make the gold index independent of the story given
(order, m): the story was accepted by a test that does not look at the index, and the index
comes from a stream of its own. So conditional on everything the predictor sees, the gold is
uniform over the object's m places, and whatever place it answers is right with probability
exactly 1/m — its expected accuracy is chance, whatever it learned elsewhere. The stratified
cycle adds finite-sample balance: for each (order, m) every path position is the gold equally
often (up to one incomplete cycle), so even a positional rule fitted in-sample cannot find luck
to exploit. Step 3 changes who is named, never the gold, so it is free to balance what *does*
read agents: the partial-ToM rules. (The earlier greedy version picked the story and the question
together so that the rules' running tallies stayed at chance; that made the gold depend on the
story's move/stay pattern, and a learner fitted on another seed found the dependence.)

Order 0 asks where the object really is, which is always its last place: the first story drawn
is kept. Hi-ToM story kinds (deception, length) are balanced per order (:func:`hitom_cells`);
orders >= 2 skip one-chapter stories without deception when a nesting share is asked for, since
there (joint semantics) a group's last shared sight is its first leaver's own belief. Hi-ToM's
later chapters revisit the first chapter's room and object with probability :data:`REVISIT_PROB`,
made by the agents who left it first (``revisit_early_leavers`` of
:func:`tomrl.generators.hitom.build_story`), which is what makes nested beliefs differ from every
single agent's. ToMi chains are drawn from all three story agents (the mover, the other agent and
the third agent C). Labels are the oracle's and are re-derived from the text by
:mod:`tomrl.generators.dataset`.

Limits: with five agents an order-4 chain leaves one agent out, so only five groups exist; in a
story where the object has two places (no deception) at most one of them can be nesting-required, and the
order-4 nesting share sits near one half. Picking the best of 66 rules in-sample still finds
luck: about +0.05 to +0.10 over chance at 120 questions per order, which shrinks with n (the
audit's ``cross_validated`` accuracy shows it). One-chapter stories without deception (the
``lengths=[1]`` sets) cannot need nesting: there order 2 is always answered by the first leaver's
own belief (partial rule ``left_first``).
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from typing import Callable, Iterator

from tomrl.generators.splits import story_id_for
from tomrl.world.oracle import BeliefOracle
from tomrl.world.partial import PARTIAL_RULES, partial_answers
from tomrl.world.sentences import render_question, render_story
from tomrl.world.world import Event, Move, ObjectLocation, Query

STORY_ATTEMPTS = 5000  # stories tried per slot before giving up (order 4 accepts ~1 in 100)
REVISIT_PROB = 0.5  # Hi-ToM: chance that a later chapter revisits the first chapter's object (hitom.build_story)


@dataclass
class Candidate:
    """The kept (story, question) of one slot."""

    story: object
    text: str
    story_id: str
    query: Query
    question: str
    answer: str


@dataclass(frozen=True)
class ChainOption:
    """One chain whose belief is the gold, with what the partial-ToM rules answer to it."""

    chain: tuple[str, ...]
    nesting: bool  # no agent of the chain believes the gold by itself
    partial_hits: tuple[bool, ...]  # each rule of PARTIAL_RULES right, in their order


def path_places(events: tuple[Event, ...] | list[Event], obj: str, first: str | None = None) -> tuple[str, ...]:
    """The distinct containers ``obj`` really occupies over the story, in order of first appearance
    (``first``: where it starts, if the events do not say it first)."""
    places: dict[str, None] = {first: None} if first else {}
    for event in events:
        if isinstance(event, (Move, ObjectLocation)) and event.obj == obj:
            places.setdefault(event.container, None)
    return tuple(places)


def beliefs_by_place(oracle: BeliefOracle, agents: tuple[str, ...], obj: str, order: int) -> dict[str, list[tuple[str, ...]]]:
    """Every place some chain of ``order`` distinct ``agents`` believes ``obj`` is in -> those chains."""
    by_place: dict[str, list[tuple[str, ...]]] = {}
    for chain in itertools.permutations(agents, order):
        belief = oracle.belief(chain, obj)
        if belief is not None:
            by_place.setdefault(belief, []).append(chain)
    return by_place


def _nesting(first_order: dict[str, str | None], chain: tuple[str, ...], gold: str) -> bool:
    return len(chain) >= 2 and gold not in {first_order[agent] for agent in chain}


def complete_for(oracle: BeliefOracle, agents: tuple[str, ...], obj: str, order: int, places: tuple[str, ...],
                 need_nesting: bool) -> dict[str, list[tuple[str, ...]]] | None:
    """Step 1 of the module docstring: the chains per path place, or None if the story is not
    complete for ``order`` (a place no chain believes, fewer than 2 places, or with
    ``need_nesting`` more than one place that no nesting-required chain believes)."""
    if len(places) < 2:
        return None
    by_place = beliefs_by_place(oracle, agents, obj, order)
    if any(place not in by_place for place in places):
        return None
    if need_nesting:
        first_order = {agent: oracle.belief((agent,), obj) for agent in agents}
        nestable = sum(any(_nesting(first_order, chain, place) for chain in by_place[place]) for place in places)
        if nestable < len(places) - 1:
            return None
    return by_place


def can_need_nesting(length: int, deception: bool) -> bool:
    """Whether a Hi-ToM story kind can have nesting-required questions at all: in one chapter
    without claims (joint semantics) a group's last shared sight is its first leaver's own belief."""
    return length > 1 or deception


@dataclass
class GoldCycle:
    """Step 2: the gold's index among the m path places, per (order, m) a seeded shuffle of
    0..m-1 after another. Its random stream is its own: nothing about the story enters it."""

    seed: int
    source: str
    _queues: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    _cycles: dict[tuple[int, int], int] = field(default_factory=dict)

    def next_index(self, order: int, places: int) -> int:
        key = (order, places)
        queue = self._queues.setdefault(key, [])
        if not queue:
            cycle = self._cycles.get(key, 0)
            self._cycles[key] = cycle + 1
            queue.extend(range(places))
            random.Random(f"{self.source}-neutral-gold:{self.seed}:{order}:{places}:{cycle}").shuffle(queue)
        return queue.pop()


@dataclass
class PartialBalance:
    """Step 3: running tallies per order (questions, summed chance, nesting-required questions, hits
    of each partial-ToM rule) and the chain choice that keeps them at target."""

    nesting_share: float
    count: dict[int, int] = field(default_factory=dict)
    chance: dict[int, float] = field(default_factory=dict)
    nesting: dict[int, int] = field(default_factory=dict)
    hits: dict[int, list[int]] = field(default_factory=dict)

    def cost(self, order: int, option: ChainOption, chance: float) -> tuple[float, float]:
        """(shortfall of the nesting-required share, summed squared margins of the partial rules
        over chance), after adding ``option``."""
        n = self.count.get(order, 0) + 1
        mean_chance = (self.chance.get(order, 0.0) + chance) / n
        shortfall = max(0.0, self.nesting_share - (self.nesting.get(order, 0) + option.nesting) / n)
        hits = self.hits.get(order, [0] * len(PARTIAL_RULES))
        margins = [(h + hit) / n - mean_chance for h, hit in zip(hits, option.partial_hits)]
        return shortfall, sum(m * m for m in margins)

    def choose(self, order: int, options: list[ChainOption], chance: float, rng: random.Random) -> ChainOption:
        """The option of least :meth:`cost` (``options`` shuffled by ``rng`` first: ties are random)."""
        options = list(options)
        rng.shuffle(options)
        if order < 2:
            return options[0]
        best = min(range(len(options)), key=lambda i: (self.cost(order, options[i], chance), i))
        chosen = options[best]
        self.count[order] = self.count.get(order, 0) + 1
        self.chance[order] = self.chance.get(order, 0.0) + chance
        self.nesting[order] = self.nesting.get(order, 0) + chosen.nesting
        hits = self.hits.setdefault(order, [0] * len(PARTIAL_RULES))
        for i, hit in enumerate(chosen.partial_hits):
            hits[i] += hit
        return chosen


@dataclass
class NeutralPicker:
    """Everything shortcut-neutral generation carries from slot to slot: the gold cycles and the
    partial-ToM tallies (one per generated file)."""

    seed: int
    source: str
    nesting_share: float
    gold: GoldCycle = field(init=False)
    partial: PartialBalance = field(init=False)

    def __post_init__(self) -> None:
        self.gold = GoldCycle(self.seed, self.source)
        self.partial = PartialBalance(self.nesting_share)

    def pick(self, oracle: BeliefOracle, obj: str, order: int, places: tuple[str, ...],
             by_place: dict[str, list[tuple[str, ...]]], agents: tuple[str, ...], rng: random.Random) -> tuple[tuple[str, ...], str]:
        """Steps 2 and 3: (chain, gold) for a story complete for ``order``."""
        gold = places[self.gold.next_index(order, len(places))]
        first_order = {agent: oracle.belief((agent,), obj) for agent in agents}
        options = []
        for chain in by_place[gold]:
            answers = partial_answers(oracle, chain, obj) if order >= 2 else {}
            hits = tuple(answers.get(name) == gold for name in PARTIAL_RULES)
            options.append(ChainOption(chain, _nesting(first_order, chain, gold), hits))
        return self.partial.choose(order, options, 1.0 / len(places), rng).chain, gold


def _stories(source: str, seed: int, index: int, build: Callable[[random.Random], object]) -> Iterator[tuple[int, object]]:
    for attempt in range(STORY_ATTEMPTS):
        yield attempt, build(random.Random(f"{source}-neutral:{seed}:{index}:{attempt}"))


def _new(source: str, story, style: str, seen: set[str]) -> tuple[str, str] | None:
    """(text, story_id) of a story not generated or excluded before, else None."""
    text = render_story(story.events, style)  # type: ignore[attr-defined]
    story_id = story_id_for(source, text)
    if story_id in seen or text in seen:
        return None
    return text, story_id


def _no_story(order: int) -> ValueError:
    return ValueError(
        f"no story complete for order {order} (every place of the object askable) in {STORY_ATTEMPTS} tries; "
        "allow longer stories (lengths), deception or more agents"
    )


def draw(cfg, source: str, style: str, index: int, build: Callable[[random.Random], object], order: int, seen: set[str],
         picker: NeutralPicker, agents_of: Callable[[object], tuple[str, ...]], need_nesting: bool,
         kind: str = "reality") -> Candidate:
    """The kept (story, question) of slot ``index``, of ``order`` (see the module docstring;
    ``kind``: what an order-0 question asks, ``reality`` or ToMi's ``memory``)."""
    for attempt, story in _stories(source, cfg.seed, index, build):
        obj = story.target  # type: ignore[attr-defined]
        oracle = BeliefOracle(story.events, story.setup, cfg.semantics)  # type: ignore[attr-defined]
        if order > 0:
            agents = agents_of(story)
            places = path_places(story.events, obj, story.setup.initial_locations.get(obj))  # type: ignore[attr-defined]
            by_place = complete_for(oracle, agents, obj, order, places, need_nesting and order >= 2 and cfg.neutral_nesting_share > 0)
            if by_place is None:
                continue
        new = _new(source, story, style, seen)
        if new is None:
            continue
        text, story_id = new
        seen.add(story_id)
        if order == 0:
            query = Query((), obj, kind)  # type: ignore[arg-type]
            answer = oracle.answer(query)
        else:
            rng = random.Random(f"{source}-neutral-chain:{cfg.seed}:{index}:{attempt}")
            chain, answer = picker.pick(oracle, obj, order, places, by_place, agents, rng)
            query = Query(chain, obj, "belief")
        if answer is None:
            raise RuntimeError(f"story {story_id}: the oracle has no answer for {query}")
        return Candidate(story, text, story_id, query, render_question(query, style), answer)
    raise _no_story(order)


def draw_hitom(cfg, source: str, index: int, build, order: int, seen: set[str], picker: NeutralPicker, length: int, deception: bool) -> Candidate:
    """The kept (story, question) of a Hi-ToM slot of ``order``: chains of the story's agents."""
    return draw(cfg, source, "hitom", index, build, order, seen, picker, lambda story: story.agents,
                can_need_nesting(length, deception))


def draw_tomi(cfg, source: str, index: int, build, question_type: str, seen: set[str], picker: NeutralPicker) -> Candidate:
    """The kept (story, question) of a ToMi slot of ``question_type``: chains of all three story agents."""
    order = {"first_order": 1, "second_order": 2}.get(question_type, 0)
    return draw(cfg, source, "tomi", index, build, order, seen, picker, lambda story: tuple(story.setup.agents), True,
                kind="memory" if question_type == "memory" else "reality")


def hitom_cells(cfg, orders: list[int], plan: random.Random) -> list[tuple[bool, int]]:
    """The (deception, length) of each Hi-ToM story, given its question's order: balanced within each
    order over the kinds of ``cfg`` that can ask it — for order >= 2 with a nesting share, the kinds
    that can need nesting (:func:`can_need_nesting`), when ``cfg`` has any."""
    kinds = [(deception, length) for deception in cfg.deception for length in cfg.lengths]
    cells: list[tuple[bool, int]] = [kinds[0]] * len(orders)
    for order in sorted(set(orders)):
        usable = kinds
        if order >= 2 and cfg.neutral_nesting_share > 0:
            usable = [kind for kind in kinds if can_need_nesting(kind[1], kind[0])] or kinds
        slots = [index for index, o in enumerate(orders) if o == order]
        items = [usable[j % len(usable)] for j in range(len(slots))]
        plan.shuffle(items)
        for index, cell in zip(slots, items):
            cells[index] = cell
    return cells
