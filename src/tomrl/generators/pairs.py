"""Contrast pairs of Hi-ToM-style questions: counterfactual story pairs and agent-swap pairs.

    tomrl data generate hitom --n 200 --split test --out pairs.jsonl pairs=true
    tomrl data generate hitom --n 200 --orders 1,2,3,4 --split test --out swaps.jsonl agent_swap=true

    from tomrl.generators import generate
    from tomrl.generators.config import GenerateConfig
    examples = generate(GenerateConfig(benchmark="hitom", n=100, pairs=True))   # 50 pairs, 100 examples

A single question can be answered right by a shortcut (the first location, the last move); two
questions whose gold answers differ for one small reason cannot both be, unless the model
follows that reason. Each pair is two examples, ``n`` counts examples (so ``n`` must be even):

- **Counterfactual pairs** (``pairs``): two stories that differ in exactly one event, the same
  question, and different gold answers. For a belief question (orders 1-4) the edit is a
  *witness* edit: one agent's ``Exit`` moved from before another agent's ``Move`` of the object
  to right after it (or back), so that agent does or does not see the move — reality is the same
  in both stories, only who saw what differs. For a reality question (order 0) the edit is a
  *move* edit: one ``Move`` of the object becomes a ``Stay`` (or back). Every edit keeps the
  story consistent (no move to where the object already is, every narrator statement true).
  The two stories have their own story ids and always share a split.
- **Agent-swap pairs** (``agent_swap``): one story, two questions of the same order whose chains
  differ in one agent, chosen so that the oracle's answers differ ("Where does Anna think …"
  vs "Where does Ben think …"). A model that tracks beliefs changes its answer; a shortcut that
  ignores who is asked cannot. Orders 1-4 only (a reality question asks no agent).

With ``shortcut_neutral`` a counterfactual pair of order 1-4 is only kept when no agent-agnostic
rule of :data:`tomrl.audit.rules.RULE_FAMILY` (e.g. "where the object was after the first exit
from its room") answers both members right, so every such rule scores at most one member of each
pair (order 0 is reality, which the object's last place always answers). Agent-swap pairs need no
such filter: both questions are about the same story and object, so an agent-agnostic rule gives
both the same answer and, the golds being different, never gets a pair right.

Both kinds are drawn by search: a story is drawn (as the Hi-ToM generator draws it), every
admissible edit or swap is tried against the belief oracle, and one whose gold flips is picked
at random; a story without one is drawn again. Both members' labels come from the oracle and are
re-derived from their own rendered text, as every generated label is. Pairs are balanced over
orders (and stories over deception and length, as in the generator); the same config and seed
give the same bytes.

Every example carries, besides the generator's usual ``meta``: counterfactual pairs ``pair_id``,
``pair_member`` (0 or 1), ``edit`` (how member 1's story differs from member 0's, in words) and
``edit_kind`` (``"witness"`` or ``"move"``); agent-swap pairs ``swap_id``, ``swap_member`` and
``swapped`` (``[agent of member 0, agent of member 1]``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from itertools import permutations
from typing import Iterator

from tomrl.generators import hitom
from tomrl.generators.config import GenerateConfig
from tomrl.generators.splits import assign_splits, story_id_for
from tomrl.generators.vocabulary import vocabulary
from tomrl.schema import Example
from tomrl.world.oracle import BeliefOracle
from tomrl.world.sentences import render_event, render_question, render_story
from tomrl.world.world import WAITING_ROOM, Enter, Event, Exit, Move, ObjectLocation, Query, Stay

SOURCE = "tomrl-hitom"
MAX_ATTEMPTS = 1000


@dataclass(frozen=True)
class StoryEdit:
    """A story that differs from another in exactly one event, and how."""

    events: tuple[Event, ...]
    kind: str  # "witness" (an Exit moved across a Move) or "move" (a Move replaced by a Stay)
    forward: str  # from the original to the edited story, in words
    backward: str  # from the edited story back to the original


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
            seen = render_event(later)
            yield StoryEdit(
                edited,
                "witness",
                forward=f"{event.agent} exits after '{seen}' instead of before it (one witness more)",
                backward=f"{event.agent} exits before '{seen}' instead of after it (one witness fewer)",
            )


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
            yield StoryEdit(
                edited,
                "move",
                forward=f"'{render_event(event)}' becomes '{render_event(stay)}'",
                backward=f"'{render_event(stay)}' becomes '{render_event(event)}'",
            )


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
    cells = _balanced([(d, length) for d in cfg.deception for length in cfg.lengths], n_pairs, plan)
    orders = _balanced(list(cfg.orders), n_pairs, plan)
    return cells, orders


def _build(cfg: GenerateConfig, rng: random.Random, deception: bool, length: int) -> hitom.HitomStory:
    from tomrl.generators.dataset import build_hitom_story

    return build_hitom_story(cfg, rng, deception, length, vocabulary(cfg.vocabulary))


def generate_pairs(cfg: GenerateConfig, seen: set[str]) -> list[Example]:
    """``cfg.n // 2`` counterfactual pairs (see the module docstring); ``seen``: story ids and
    texts not to generate (both members' stories are added to it)."""
    cells, orders = _plan(cfg, "pairs")
    pairs: list[tuple[str, tuple, list[Example]]] = []
    for index, ((deception, length), order) in enumerate(zip(cells, orders)):
        for attempt in range(MAX_ATTEMPTS):
            rng = random.Random(f"{SOURCE}-pairs:{cfg.seed}:{index}:{attempt}")
            story = _build(cfg, rng, deception, length)
            oracle = BeliefOracle(story.events, story.setup, cfg.semantics)
            if order == 0:
                edits = list(move_edits(story.events, story.setup, story.target))
                chains = [()]
            else:
                edits = list(witness_edits(story.events))
                chains = _chains(story.agents, order)
            candidates = []
            for edit in edits:
                edited = BeliefOracle(edit.events, story.setup, cfg.semantics)
                for chain in chains:
                    query = Query(chain, story.target, "belief" if chain else "reality")
                    if oracle.answer(query) != edited.answer(query):
                        candidates.append((edit, query))
            if cfg.shortcut_neutral and order > 0:
                candidates = _no_rule_solves_both(candidates, story, oracle, cfg, rng)
            if not candidates:
                continue
            edit, query = rng.choice(candidates)
            members = [story.events, edit.events]
            description = edit.forward
            if rng.random() < 0.5:  # either member may be the edited story: edits go both ways
                members.reverse()
                description = edit.backward
            texts = [render_story(events, "hitom") for events in members]
            ids = [story_id_for(SOURCE, text) for text in texts]
            if any(key in seen for key in (*ids, *texts)):
                continue
            seen.update((*ids, *texts))
            pair_id = story_id_for(f"{SOURCE}-pair", "\n\n".join([*texts, render_question(query, "hitom")]))
            examples = []
            for member, (events, text, story_id) in enumerate(zip(members, texts, ids)):
                member_oracle = BeliefOracle(events, story.setup, cfg.semantics)
                extra = {"pair_id": pair_id, "pair_member": member, "edit": description, "edit_kind": edit.kind}
                examples.append(_example(cfg, index, story, events, text, story_id, query, 0, member_oracle, extra))
            if examples[0].answer == examples[1].answer:  # the search above makes this a bug
                raise RuntimeError(f"pair {pair_id}: both members have the answer {examples[0].answer!r}")
            pairs.append((pair_id, (deception, length), examples))
            break
        else:
            raise ValueError(f"no story with a label-flipping edit for order {order} after {MAX_ATTEMPTS} tries")
    split_of = assign_splits([p[0] for p in pairs], [p[1] for p in pairs], cfg.split_fractions, cfg.seed)
    return [example.replace(split=split_of[pair_id]) for pair_id, _, examples in pairs for example in examples]


def _no_rule_solves_both(candidates: list, story: hitom.HitomStory, oracle: BeliefOracle, cfg: GenerateConfig, rng: random.Random) -> list:
    """The first of ``candidates`` (in a seeded random order) that no agent-agnostic rule of
    :data:`tomrl.audit.rules.RULE_FAMILY` answers right in both stories, as a list (empty: none)."""
    from tomrl.audit.rules import rule_hits

    original = render_story(story.events, "hitom")
    for edit, query in rng.sample(candidates, len(candidates)):
        question = render_question(query, "hitom")
        edited = BeliefOracle(edit.events, story.setup, cfg.semantics).answer(query)
        hits, _ = rule_hits(original, question, oracle.answer(query))  # type: ignore[arg-type]
        edited_hits, _ = rule_hits(render_story(edit.events, "hitom"), question, edited)  # type: ignore[arg-type]
        if not any(a and b for a, b in zip(hits, edited_hits)):
            return [(edit, query)]
    return []


def generate_swaps(cfg: GenerateConfig, seen: set[str]) -> list[Example]:
    """``cfg.n // 2`` agent-swap pairs (see the module docstring), one story each."""
    from tomrl.generators.dataset import _with_splits

    cells, orders = _plan(cfg, "swaps")
    stories: list[tuple[str, tuple, list[Example]]] = []
    for index, ((deception, length), order) in enumerate(zip(cells, orders)):
        for attempt in range(MAX_ATTEMPTS):
            rng = random.Random(f"{SOURCE}-swaps:{cfg.seed}:{index}:{attempt}")
            story = _build(cfg, rng, deception, length)
            text = render_story(story.events, "hitom")
            story_id = story_id_for(SOURCE, text)
            if story_id in seen or text in seen:
                continue
            oracle = BeliefOracle(story.events, story.setup, cfg.semantics)
            candidates = []
            for chain in _chains(story.agents, order):
                answer = oracle.belief(chain, story.target)
                for position, asked in enumerate(chain):
                    for other in story.agents:
                        if other in chain:
                            continue
                        swapped = chain[:position] + (other,) + chain[position + 1 :]
                        if oracle.belief(swapped, story.target) != answer:
                            candidates.append((chain, swapped, asked, other))
            if not candidates:
                continue
            seen.update((story_id, text))
            chain, swapped, asked, other = rng.choice(candidates)
            swap_id = f"{story_id}-swap"
            examples = [
                _example(
                    cfg, index, story, story.events, text, story_id, Query(c, story.target), member, oracle,
                    {"swap_id": swap_id, "swap_member": member, "swapped": [asked, other]},
                )
                for member, c in enumerate((chain, swapped))
            ]
            if examples[0].answer == examples[1].answer:
                raise RuntimeError(f"swap {swap_id}: both members have the answer {examples[0].answer!r}")
            stories.append((story_id, (deception, length), examples))
            break
        else:
            raise ValueError(f"no story with an answer-changing agent swap for order {order} after {MAX_ATTEMPTS} tries")
    return _with_splits(stories, cfg)
