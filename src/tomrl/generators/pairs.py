"""Contrast pairs of Hi-ToM-style questions: counterfactual story pairs and agent-swap pairs.

    tomrl data generate hitom --n 200 --split test --out pairs.jsonl pairs=true
    tomrl data generate hitom --n 200 --orders 1,2,3,4 --split test --out swaps.jsonl agent_swap=true

    from tomrl.generators import generate
    from tomrl.generators.config import GenerateConfig
    examples = generate(GenerateConfig(benchmark="hitom", n=100, pairs=True))   # 50 pairs, 100 examples

A single question can be answered right by a shortcut (the first location, the last move); two
questions whose gold answers differ for one small reason cannot both be, unless the model
follows that reason. Each pair is two examples, ``n`` counts examples (so ``n`` must be even):

- **Counterfactual pairs** (``pairs``): two stories made from one base story by two edits of
  the same kind and shape, the same question, and different gold answers. Neither member is "the
  edited one": the trace an edit leaves in the text is in both. For a belief
  question (orders 1-4) both edits are *witness* edits across the same move: member 0 is the base
  story with agent X's ``Exit`` moved from before another agent's ``Move`` of the object to right
  after it, member 1 the same with another agent Y's exit moved there instead. Each story has
  exactly one agent who stays to see a move after acting, and the exit right after that move;
  reality is the same in both, only *who* saw the move differs. (An edit of one member only would
  leave "an exit right after another agent's move" in that member alone, which never happens in an
  unedited Hi-ToM chapter: a rule keyed on it told the members apart.) For a reality question
  (order 0) both edits are *move* edits: one ``Move`` of the object becomes a ``Stay``, a
  different move in each member. Every edit keeps the story consistent (no move to where the
  object already is, every narrator statement true). The two stories have their own story ids and
  always share a split; the base story itself is not emitted.
- **Agent-swap pairs** (``agent_swap``): one story, two questions of the same order whose chains
  differ in one agent, chosen so that the oracle's answers differ ("Where does Anna think …"
  vs "Where does Ben think …"). A model that tracks beliefs changes its answer; a shortcut that
  ignores who is asked cannot. Orders 1-4 only (a reality question asks no agent). Among the
  swaps of a story, and over up to :data:`PARTIAL_ATTEMPTS` stories, preferred are (in this order)
  swaps whose two chains have the same earliest leaver (so the partial-ToM rule "the belief of
  the named agent who left first" gives both one answer and misses one) and that no partial-ToM
  rule (:mod:`tomrl.world.partial`) answers both right, then those no partial rule solves, then
  those with the same earliest leaver. A first-order swap is always solved by them (a
  first-order belief is its own partial answer).

With ``shortcut_neutral`` a counterfactual pair of order 1-4 is only kept when no agent-agnostic
rule of :data:`tomrl.audit.rules.RULE_FAMILY` (e.g. "where the object was after the first exit
from its room") answers both members right, so every such rule scores at most one member of each
pair (order 0 is reality, which the object's last place always answers); for orders 2-4, pairs
that no partial-ToM rule answers both right either are searched for over up to
:data:`PARTIAL_ATTEMPTS` stories before settling for one only the rule family fails. (In a
one-chapter story without claims or tells the chain's earliest leaver always holds the nested
belief, so no such pair exists there; with ``shortcut_neutral`` orders 2-4 therefore use only
the story kinds that can need nesting, multi-chapter or deceptive, balanced per order as
:func:`tomrl.generators.neutral.hitom_cells` deals them (when ``neutral_nesting_share`` > 0 and the
config has such kinds), and later chapters revisit the asked object, as in
:mod:`tomrl.generators.neutral`.)
Agent-swap pairs need no rule filter: both questions are about the same story and object, so an
agent-agnostic rule gives both the same answer and, the golds being different, never gets a pair
right.

**Limits: chains that leave out fewer than two agents (refused with ``shortcut_neutral``).** Under
joint semantics a chain of k agents believes what it last saw together: in the anchor chapter, the
object's place when the chain's first member walked out. With n agents in the chapter that is the
place right after one of its first n - k + 1 exits (the chain leaves out n - k agents, who may be
the first to leave). So each member's gold is one of a few *exit places*, which an agent-blind
reader sees (``exit_start_j`` of :mod:`tomrl.audit.rules`); the rule filter only makes the two
members differ in *which* exit index. What tells the members apart without names is which
position's exit was displaced, and that is all a reader needs to pick the index per member. When
the chain leaves out one agent (k = n - 1) the gold is always the place at the first or the second
exit: two exit rules, one per member, answer every such pair, and the learner of
:mod:`tomrl.audit.learner` fitted on other seeds gets both members of 19-26 % of pairs against a
pair chance of 8-10 % (``tomrl data neutrality``, seeds 201-205, 150 pairs each, 2026-11-26: order 4
with five agents 21.6 % vs 7.6 %, order 3 with four 18.8 % vs 8.0 %, order 2 with three 25.5 % vs
9.8 %); when it leaves out none (k = n) no label-flipping pair exists. With two or more agents left
out, in the agent counts the generator allows (at most five), the learner stays near pair chance
(order 3 with five agents 9.6 % vs 8.1 %, order 2 with four agents within too; a trial with six
agents, not allowed, gave order 4 16.0 % vs 7.6 %, so more agents alone is no fix), so :class:`tomrl.generators.config.GenerateConfig` refuses ``pairs`` with
``shortcut_neutral`` for a belief order above ``agents - 2`` (order 4 always, as five agents is the
most), pointing to agent swaps, which are neutral at every order (an agent-agnostic answer is the
same for both members). Making the orientation uniform (which member has the later exit, drawn from
a stream of its own) was tried and does not help: it caps the best pair of rules at one half, not at
chance, since the gold stays one of two exit places per member; only stories whose k-chains last met
outside one chapter's exit order would remove it.

Both kinds are drawn by search: a story is drawn (as the Hi-ToM generator draws it), every
admissible pair of edits or swap is tried against the belief oracle, and one whose gold flips is
picked at random (which edit is member 0 too); a story without one is drawn again. Both members'
labels come from the oracle and are re-derived from their own rendered text, as every generated
label is. Pairs are balanced over orders (and stories over deception and length, as in the
generator); the same config and seed give the same bytes.

Every example carries, besides the generator's usual ``meta``: counterfactual pairs ``pair_id``,
``pair_member`` (0 or 1), ``edit`` (how both members differ from their base story, in words),
``member_edits`` (each member's edit) and ``edit_kind`` (``"witness"`` or ``"move"``); agent-swap
pairs ``swap_id``, ``swap_member`` and ``swapped`` (``[agent of member 0, agent of member 1]``);
both ``partial_rules_solving_both`` (the partial-ToM rules that answer both members right).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from itertools import permutations
from typing import Iterable, Iterator

from tomrl.audit.rules import rule_hits
from tomrl.generators import hitom, neutral
from tomrl.generators.config import GenerateConfig
from tomrl.generators.splits import assign_splits, story_id_for
from tomrl.generators.vocabulary import vocabulary
from tomrl.schema import Example
from tomrl.world.oracle import BeliefOracle
from tomrl.world.partial import PARTIAL_RULES, partial_answers
from tomrl.world.sentences import render_event, render_question, render_story
from tomrl.world.world import WAITING_ROOM, Enter, Event, Exit, Move, ObjectLocation, Query, Stay

SOURCE = "tomrl-hitom"
MAX_ATTEMPTS = 1000
PARTIAL_ATTEMPTS = 40  # stories drawn for a pair no partial-ToM rule solves before settling for one the rule family cannot


@dataclass(frozen=True)
class StoryEdit:
    """A story that differs from a base story in exactly one event, and how."""

    events: tuple[Event, ...]
    kind: str  # "witness" (an Exit moved across a Move) or "move" (a Move replaced by a Stay)
    anchor: int  # index, in the base story, of the Move the edit is about (now witnessed, or made a stay)
    description: str  # from the base story to the edited one, in words


# The meta keys that tie two examples into one contrast pair: (pair id, member index 0 or 1).
PAIR_META = (("pair_id", "pair_member"), ("swap_id", "swap_member"))


def pair_units(examples: Iterable[Example]) -> list[tuple[str, str]]:
    """The (member 0 id, member 1 id) of each complete contrast pair (counterfactual or agent swap) in
    ``examples``, in order of first appearance; a pair with a member missing is left out."""
    members: dict[str, dict[int, str]] = {}
    for example in examples:
        for id_key, member_key in PAIR_META:
            if id_key in example.meta:
                members.setdefault(f"{id_key}:{example.meta[id_key]}", {})[int(example.meta[member_key])] = example.id
                break
    return [(pair[0], pair[1]) for pair in members.values() if set(pair) == {0, 1}]


def witness_edits(events: tuple[Event, ...]) -> Iterator[StoryEdit]:
    """Every story made by moving one agent's ``Exit`` to right after a later ``Move`` of the same
    chapter by another agent (the leaver now sees that move). The exit stays after the agent's own
    action and before the chapter's group enters the waiting room."""
    for i, event in enumerate(events):
        if not isinstance(event, Exit) or event.room == WAITING_ROOM:
            continue
        for j in range(i + 1, len(events)):
            later = events[j]
            if isinstance(later, Enter):
                break  # the chapter is over
            if not isinstance(later, Move) or later.agent == event.agent:
                continue
            edited = events[:i] + events[i + 1 : j + 1] + (event,) + events[j + 1 :]
            yield StoryEdit(edited, "witness", j, f"{event.agent} exits right after '{render_event(later)}' instead of before it")


def move_edits(events: tuple[Event, ...], setup, obj: str) -> Iterator[StoryEdit]:
    """Every story made by replacing one ``Move`` of ``obj`` with a ``Stay`` of its mover, where
    the rest of the story stays consistent (see :func:`consistent`)."""
    location: dict[str, str] = {}
    for i, event in enumerate(events):
        if isinstance(event, Enter):
            for agent in event.agents:
                location[agent] = event.room
        if not isinstance(event, Move) or event.obj != obj:
            continue
        stay = Stay(event.agent, location[event.agent])
        edited = events[:i] + (stay,) + events[i + 1 :]
        if consistent(edited, setup):
            yield StoryEdit(edited, "move", i, f"'{render_event(event)}' becomes '{render_event(stay)}'")


def paired_edits(edits: list[StoryEdit]) -> list[tuple[StoryEdit, StoryEdit]]:
    """Every two edits of one base story that have the same shape, so that neither member of a
    pair made of them is "the edited one": two witness edits across the *same* move by two
    different agents (each story has one lingering agent, whose exit comes right after that move),
    or two move edits of two different moves (each story has one move made a stay)."""
    return [
        (a, b)
        for k, a in enumerate(edits)
        for b in edits[k + 1 :]
        if a.kind == b.kind and (a.anchor == b.anchor) == (a.kind == "witness")
    ]


def consistent(events: tuple[Event, ...], setup) -> bool:
    """No object is moved to where it already is, and every narrator statement is true."""
    where = dict(setup.initial_locations)
    for event in events:
        if isinstance(event, Move):
            if where.get(event.obj) == event.container:
                return False
            where[event.obj] = event.container
        elif isinstance(event, ObjectLocation) and where.get(event.obj) != event.container:
            return False
    return True


def _chains(agents: tuple[str, ...], order: int) -> list[tuple[str, ...]]:
    return list(permutations(agents, order))


def _meta(cfg: GenerateConfig, index: int, story: hitom.HitomStory, events, query: Query, answer: str, true_location: str) -> dict:
    from tomrl.generators.dataset import hitom_meta

    return hitom_meta(cfg, SOURCE, index, story, events, query, answer, true_location)


def _example(cfg, index, story, events, text, story_id, query, k, oracle, extra: dict) -> Example:
    from tomrl.generators.dataset import _labelled, _rederiving_oracle

    question, answer, true_location = _labelled(oracle, _rederiving_oracle(text, "hitom", cfg), query, "hitom", story_id, story.target)
    return Example(
        id=f"{story_id}-q{k}",
        source=SOURCE,
        split="train",
        story=text,
        question=question,
        answer=answer,
        order=query.order,
        question_type=hitom.ORDER_NAMES[query.order],
        deception=story.deception,
        story_length=len(story.chapter_rooms),
        story_id=story_id,
        choices=list(story.choices),
        meta={**_meta(cfg, index, story, events, query, answer, true_location), **extra},
    )


def _plan(cfg: GenerateConfig, kind: str) -> tuple[list[tuple[bool, int]], list[int]]:
    """Story kinds (deception, length) and question orders of the ``cfg.n // 2`` pairs, balanced."""
    from tomrl.generators.dataset import _balanced

    n_pairs = cfg.n // 2
    plan = random.Random(f"{SOURCE}-{kind}-plan:{cfg.seed}")
    if cfg.shortcut_neutral:  # orders >= 2 skip the story kinds that cannot need nesting, as neutral generation does
        orders = _balanced(list(cfg.orders), n_pairs, plan)
        return neutral.hitom_cells(cfg, orders, plan), orders
    cells = _balanced([(d, length) for d in cfg.deception for length in cfg.lengths], n_pairs, plan)
    orders = _balanced(list(cfg.orders), n_pairs, plan)
    return cells, orders


def _build(cfg: GenerateConfig, rng: random.Random, deception: bool, length: int) -> hitom.HitomStory:
    """A story as the generator draws it; with ``shortcut_neutral`` later chapters revisit the asked
    object as in :mod:`tomrl.generators.neutral` (a one-chapter truthful story leaves the partial-ToM
    rules nothing to get wrong: the chain's earliest leaver always holds the nested belief)."""
    from tomrl.generators.dataset import build_hitom_story

    revisit = neutral.REVISIT_PROB if cfg.shortcut_neutral else 0.0
    return build_hitom_story(cfg, rng, deception, length, vocabulary(cfg.vocabulary), revisit)


def generate_pairs(cfg: GenerateConfig, seen: set[str]) -> list[Example]:
    """``cfg.n // 2`` counterfactual pairs (see the module docstring); ``seen``: story ids and
    texts not to generate (both members' stories are added to it)."""
    cells, orders = _plan(cfg, "pairs")
    pairs: list[tuple[str, tuple, list[Example]]] = []
    for index, ((deception, length), order) in enumerate(zip(cells, orders)):
        fallback = None  # with shortcut_neutral: the first pair the rule family cannot solve, if none beats the partial rules too
        for attempt in range(MAX_ATTEMPTS):
            rng = random.Random(f"{SOURCE}-pairs:{cfg.seed}:{index}:{attempt}")
            story = _build(cfg, rng, deception, length)
            candidates = _label_flipping_pairs(cfg, story, order)
            rng.shuffle(candidates)
            chosen = None
            for candidate in candidates:
                if cfg.shortcut_neutral and order > 0 and _family_solves_both(candidate, story):
                    continue
                if cfg.shortcut_neutral and order > 1 and _partial_solving_both(candidate, story.target):
                    if fallback is None:
                        fallback = (story, candidate, rng.random() < 0.5)
                    continue
                chosen = (story, candidate, rng.random() < 0.5)
                break
            if chosen is None and fallback is not None and attempt + 1 >= PARTIAL_ATTEMPTS:
                chosen, fallback = fallback, None  # the stories of this config leave the partial rules no way to fail
            if chosen is None:
                continue
            examples = _pair_examples(cfg, index, *chosen, seen)
            if examples is None:
                continue
            pairs.append((examples[0].meta["pair_id"], (deception, length), examples))
            break
        else:
            raise ValueError(f"no story with a label-flipping pair of edits for order {order} after {MAX_ATTEMPTS} tries")
    split_of = assign_splits([p[0] for p in pairs], [p[1] for p in pairs], cfg.split_fractions, cfg.seed)
    return [example.replace(split=split_of[pair_id]) for pair_id, _, examples in pairs for example in examples]


@dataclass(frozen=True)
class _Candidate:
    """Two edits of one base story (the pair's members) and the question whose gold they flip."""

    edits: tuple[StoryEdit, StoryEdit]
    oracles: tuple[BeliefOracle, BeliefOracle]
    query: Query


def _label_flipping_pairs(cfg: GenerateConfig, story: hitom.HitomStory, order: int) -> list[_Candidate]:
    """Every (pair of same-shape edits, question of ``order``) whose gold differs between the members."""
    if order == 0:
        edits = list(move_edits(story.events, story.setup, story.target))
        queries = [Query((), story.target, "reality")]
    else:
        edits = list(witness_edits(story.events))
        queries = [Query(chain, story.target, "belief") for chain in _chains(story.agents, order)]
    oracles = [BeliefOracle(edit.events, story.setup, cfg.semantics) for edit in edits]
    position = {id(edit): k for k, edit in enumerate(edits)}
    candidates = []
    for first, second in paired_edits(edits):
        pair = (oracles[position[id(first)]], oracles[position[id(second)]])
        for query in queries:
            if pair[0].answer(query) != pair[1].answer(query):
                candidates.append(_Candidate((first, second), pair, query))
    return candidates


def _family_solves_both(candidate: _Candidate, story: hitom.HitomStory) -> bool:
    """Whether an agent-agnostic rule of :data:`tomrl.audit.rules.RULE_FAMILY` answers both members right."""
    question = render_question(candidate.query, "hitom")
    hits = [
        rule_hits(render_story(edit.events, "hitom"), question, oracle.answer(candidate.query))[0]  # type: ignore[arg-type]
        for edit, oracle in zip(candidate.edits, candidate.oracles)
    ]
    return any(a and b for a, b in zip(*hits))


def _partial_solving_both(candidate: _Candidate, obj: str) -> list[str]:
    """The partial-ToM rules (:data:`tomrl.world.partial.PARTIAL_RULES`) that answer both members right."""
    return _partial_solving(list(zip(candidate.oracles, (candidate.query.chain,) * 2)), obj)


def _partial_solving(members: list[tuple[BeliefOracle, tuple[str, ...]]], obj: str) -> list[str]:
    """The partial-ToM rules right on every (oracle, chain) of ``members`` (none for reality questions)."""
    if not all(chain for _, chain in members):
        return []
    right = [
        {name for name, answer in partial_answers(oracle, chain, obj).items() if answer == oracle.belief(chain, obj)}
        for oracle, chain in members
    ]
    return sorted(set.intersection(*right))


def _pair_examples(cfg, index: int, story: hitom.HitomStory, candidate: _Candidate, reverse: bool, seen: set[str]) -> list[Example] | None:
    """The two examples of a pair (None if a member's story was generated or excluded already)."""
    edits, oracles = list(candidate.edits), list(candidate.oracles)
    if reverse:  # which edit is member 0 is drawn: the pair is symmetric
        edits.reverse()
        oracles.reverse()
    texts = [render_story(edit.events, "hitom") for edit in edits]
    ids = [story_id_for(SOURCE, text) for text in texts]
    if any(key in seen for key in (*ids, *texts)):
        return None
    seen.update((*ids, *texts))
    query = candidate.query
    pair_id = story_id_for(f"{SOURCE}-pair", "\n\n".join([*texts, render_question(query, "hitom")]))
    kind = edits[0].kind
    anchor = render_event(story.events[edits[0].anchor])
    shape = (
        f"the base story with one agent's exit moved to right after '{anchor}'"
        if kind == "witness"
        else "the base story with one move of the object made a stay"
    )
    extra = {
        "pair_id": pair_id,
        "edit": f"each member is {shape}: member 0: {edits[0].description}; member 1: {edits[1].description}",
        "edit_kind": kind,
        "member_edits": [edit.description for edit in edits],
        "partial_rules_solving_both": _partial_solving_both(candidate, story.target),
    }
    examples = [
        _example(cfg, index, story, edit.events, text, story_id, query, 0, oracle, {**extra, "pair_member": member})
        for member, (edit, oracle, text, story_id) in enumerate(zip(edits, oracles, texts, ids))
    ]
    if examples[0].answer == examples[1].answer:  # the search above makes this a bug
        raise RuntimeError(f"pair {pair_id}: both members have the answer {examples[0].answer!r}")
    return examples


def generate_swaps(cfg: GenerateConfig, seen: set[str]) -> list[Example]:
    """``cfg.n // 2`` agent-swap pairs (see the module docstring), one story each."""
    from tomrl.generators.dataset import _with_splits

    cells, orders = _plan(cfg, "swaps")
    stories: list[tuple[str, tuple, list[Example]]] = []
    for index, ((deception, length), order) in enumerate(zip(cells, orders)):
        best = None  # (rank, story, text, story_id, oracle, swap): the best swap drawn so far
        for attempt in range(MAX_ATTEMPTS):
            rng = random.Random(f"{SOURCE}-swaps:{cfg.seed}:{index}:{attempt}")
            story = _build(cfg, rng, deception, length)
            text = render_story(story.events, "hitom")
            story_id = story_id_for(SOURCE, text)
            if story_id in seen or text in seen:
                continue
            oracle = BeliefOracle(story.events, story.setup, cfg.semantics)
            candidates = _answer_changing_swaps(oracle, story, order)
            if candidates:
                rank = min(rank for rank, _ in candidates)
                if best is None or rank < best[0]:
                    best = (rank, story, text, story_id, oracle, rng.choice([swap for r, swap in candidates if r == rank]))
            if best is not None and (best[0] == (0 if order > 1 else 3) or attempt + 1 >= PARTIAL_ATTEMPTS):
                break  # the best rank there can be (order 1: every swap is 3), or the best of PARTIAL_ATTEMPTS stories
        if best is None:
            raise ValueError(f"no story with an answer-changing agent swap for order {order} after {MAX_ATTEMPTS} tries")
        _, story, text, story_id, oracle, (chain, swapped, asked, other) = best
        seen.update((story_id, text))
        swap_id = f"{story_id}-swap"
        examples = [
            _example(
                cfg, index, story, story.events, text, story_id, Query(c, story.target), member, oracle,
                {
                    "swap_id": swap_id,
                    "swap_member": member,
                    "swapped": [asked, other],
                    "partial_rules_solving_both": _partial_solving([(oracle, chain), (oracle, swapped)], story.target),
                },
            )
            for member, c in enumerate((chain, swapped))
        ]
        if examples[0].answer == examples[1].answer:
            raise RuntimeError(f"swap {swap_id}: both members have the answer {examples[0].answer!r}")
        stories.append((story_id, (deception, length), examples))
    return _with_splits(stories, cfg)


def _answer_changing_swaps(oracle: BeliefOracle, story: hitom.HitomStory, order: int) -> list[tuple[int, tuple]]:
    """Every ``(rank, (chain, swapped chain, agent swapped out, agent swapped in))`` of ``order``
    whose two chains' answers differ. Rank 0 (preferred): both chains have the same earliest leaver
    (so ``left_first`` answers both with one belief and misses one) and no partial-ToM rule
    answers both right; 1: no partial rule answers both right; 2: the same earliest leaver; 3: the
    rest (e.g. every first-order swap: a first-order belief is its own partial answer)."""
    left_first = PARTIAL_RULES["left_first"]
    swaps = []
    for chain in _chains(story.agents, order):
        answer = oracle.belief(chain, story.target)
        for position, asked in enumerate(chain):
            for other in story.agents:
                if other in chain:
                    continue
                swapped = chain[:position] + (other,) + chain[position + 1 :]
                if oracle.belief(swapped, story.target) == answer:
                    continue
                same_leaver = left_first(oracle, chain, story.target) == left_first(oracle, swapped, story.target)
                unsolved = not _partial_solving([(oracle, chain), (oracle, swapped)], story.target)
                rank = {(True, True): 0, (False, True): 1, (True, False): 2, (False, False): 3}[(same_leaver, unsolved)]
                swaps.append((rank, (chain, swapped, asked, other)))
    return swaps
