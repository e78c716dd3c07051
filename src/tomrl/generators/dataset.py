"""Turn generated stories into unified-schema examples: balancing, labels, self-check, splits.

    from tomrl.generators import generate
    from tomrl.generators.config import GenerateConfig
    examples = generate(GenerateConfig(benchmark="hitom", n=2000, stories=600, orders=[0, 1, 2, 3]))

What every generated :class:`tomrl.schema.Example` carries:

- ``source`` ``"tomrl-hitom"`` / ``"tomrl-tomi"``; ``story_id`` = content hash of the story text
  (:func:`tomrl.generators.splits.story_id_for`), so equal stories have equal ids across runs;
  ``id`` = ``"{story_id}-q{k}"``;
- ``split`` assigned per story in ``split_fractions`` (stratified by story kind), never shared;
- ``order`` (0-4; ToMi: reality and memory 0, first order 1, second order 2), ``question_type``
  (Hi-ToM ``reality`` / ``first_order`` … ``fourth_order``; ToMi ``first_order``,
  ``second_order``, ``reality``, ``memory``), ``deception`` (Hi-ToM), ``story_length`` (Hi-ToM:
  chapters; ToMi: sentences), ``choices`` (Hi-ToM: the story's 15 containers);
- ``meta``: ``generator``, ``seed``, ``story_index``, ``semantics`` (the oracle rule of the
  label), ``query`` (``{"chain": [...], "object": ..., "kind": ...}``, what the question asks),
  ``agents``, ``true_location``, ``first_location`` (where the object was first said to be),
  ``tom`` (answer differs from the true location), ``tells`` (claims + tells in the story),
  and for ToMi ``story_type`` and ``asked_agent`` (0 = the mover, 1 = the other agent, 2 = the
  third agent C, whom only ``shortcut_neutral`` asks about).

With ``shortcut_neutral`` each story is drawn first and then its one question, gold before chain,
by :mod:`tomrl.generators.neutral` (Hi-ToM story kinds balanced per order among those that can ask
it, :func:`tomrl.generators.neutral.hitom_cells`; stories shuffled before the split assignment).

Every label is re-derived from the story text alone (parsed by :mod:`tomrl.world.parsers`,
setup inferred, fresh oracle) and generation stops with an error on any difference.

With ``adversarial_filter`` a pool of ``adversarial_pool`` × ``n`` questions is drawn first and AFLite
keeps the ``n`` an agent-blind learner predicts least, balanced over orders
(:mod:`tomrl.generators.adversarial`); splits are assigned after the filter.

With ``pairs`` or ``agent_swap`` the examples come in contrast pairs instead (counterfactual
stories one event apart, or one story asked about two agents): :mod:`tomrl.generators.pairs`.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Callable

from tomrl.data_checks import validate_answers_in_story
from tomrl.generators import adversarial, hitom, neutral, tomi
from tomrl.generators.config import GenerateConfig
from tomrl.generators.splits import assign_splits, story_id_for
from tomrl.generators.vocabulary import vocabulary
from tomrl.io import BadInputError, scan_jsonl
from tomrl.schema import Example, ReadReport, read_examples
from tomrl.world.oracle import BeliefOracle
from tomrl.world.parsers import parse_question, parse_story
from tomrl.world.sentences import render_question, render_story
from tomrl.world.world import PrivateTell, PublicClaim, Query

MAX_ATTEMPTS = 1000


def generate(cfg: GenerateConfig, skip_bad: bool = False, reports: list[ReadReport] | None = None) -> list[Example]:
    """The examples ``cfg`` describes (deterministic in ``cfg``; see the module docstring).

    ``skip_bad`` and ``reports`` apply to the ``exclude_stories_from`` files (see
    :func:`excluded_story_keys`).
    """
    excluded = excluded_story_keys(cfg.exclude_stories_from, skip_bad, reports)
    if cfg.pairs or cfg.agent_swap:
        from tomrl.generators.pairs import generate_pairs, generate_swaps

        examples = generate_pairs(cfg, excluded) if cfg.pairs else generate_swaps(cfg, excluded)
    else:
        draw = _hitom_stories if cfg.benchmark == "hitom" else _tomi_stories
        if cfg.adversarial_filter:  # a larger pool first, then AFLite (tomrl.generators.adversarial)
            stories = adversarial.keep_unpredictable(draw(adversarial.pool_config(cfg), excluded), cfg)
        else:
            stories = draw(cfg, excluded)
        examples = _with_splits(stories, cfg)
    try:
        validate_answers_in_story(examples)
    except BadInputError as err:  # every answer comes from the oracle: a miss is a generator bug
        raise RuntimeError(f"generator bug: {err}") from None
    return examples


def excluded_story_keys(paths: list[str], skip_bad: bool = False, reports: list[ReadReport] | None = None) -> set[str]:
    """Story ids and texts of existing example files, which generation must not repeat.

    A bad line stops the read unless ``skip_bad``; then it is counted in the file's report
    (appended to ``reports``) and, so that skipping can never let an excluded story back in, the
    ``story`` and ``story_id`` strings of every line that is a JSON object are excluded too.
    """
    keys: set[str] = set()
    for path in paths:
        if not Path(path).is_file():
            raise BadInputError(f"{path}: exclude_stories_from file not found")
        report = ReadReport(str(path))
        for example in read_examples(path, skip_bad=skip_bad, report=report):
            keys.add(example.story_id)
            keys.add(example.story)
        if report.skipped:
            for _, row, _ in scan_jsonl(path):
                for name in ("story_id", "story"):
                    if row is not None and isinstance(row.get(name), str):
                        keys.add(row[name])
        if reports is not None:
            reports.append(report)
    return keys


def questions_per_story(n: int, stories: int) -> list[int]:
    """``n`` questions spread over ``stories`` as evenly as possible (earlier stories get one more)."""
    return [n // stories + (1 if j < n % stories else 0) for j in range(stories)]


def _balanced(values: list, count: int, rng: random.Random) -> list:
    """``count`` items cycling through ``values``, shuffled: each value within one of the others."""
    items = [values[j % len(values)] for j in range(count)]
    rng.shuffle(items)
    return items


def _new_story(source: str, seed: int, index: int, build: Callable[[random.Random], object], render: Callable[[object], str], seen: set[str]):
    for attempt in range(MAX_ATTEMPTS):
        story = build(random.Random(f"{source}:{seed}:{index}:{attempt}"))
        text = render(story)
        story_id = story_id_for(source, text)
        if story_id not in seen and text not in seen:
            seen.add(story_id)
            return story, text, story_id
    raise ValueError(
        f"could not draw a story unlike the {len(seen)} already generated or excluded after {MAX_ATTEMPTS} tries; "
        "ask for fewer stories or allow more kinds (lengths, deception, story types)"
    )


def _rederiving_oracle(story_text: str, style: str, cfg: GenerateConfig) -> BeliefOracle:
    """A fresh oracle built from the story text alone (parsed events, inferred setup)."""
    return BeliefOracle(parse_story(story_text, style), semantics=cfg.semantics)  # type: ignore[arg-type]


def _check_label(rederiving: BeliefOracle, question: str, answer: str, where: str) -> None:
    """Any difference between the label and the text's answer is a generator or parser bug."""
    rederived = rederiving.answer(parse_question(question))
    if rederived != answer:
        raise RuntimeError(f"{where}: label {answer!r} but the story text gives {rederived!r} for {question!r}")


def _hitom_question_type(order: int) -> str:
    return hitom.ORDER_NAMES[order]


def _tells(events) -> int:
    return sum(isinstance(e, (PublicClaim, PrivateTell)) for e in events)


def _hitom_stories(cfg: GenerateConfig, seen: set[str]) -> list[adversarial.Story]:
    source = "tomrl-hitom"
    n_stories = cfg.stories or cfg.n
    per_story = questions_per_story(cfg.n, n_stories)
    plan = random.Random(f"{source}-plan:{cfg.seed}")
    cells = _balanced([(d, length) for d in cfg.deception for length in cfg.lengths], n_stories, plan)
    order_cycle = list(cfg.orders)
    plan.shuffle(order_cycle)
    if cfg.shortcut_neutral:
        cells = neutral.hitom_cells(cfg, [order_cycle[index % len(order_cycle)] for index in range(n_stories)], plan)
    words = vocabulary(cfg.vocabulary)
    picker = neutral.NeutralPicker(cfg.seed, source, cfg.neutral_nesting_share)
    stories: list[adversarial.Story] = []
    slot = 0
    for index in range(n_stories):
        deception, length = cells[index]

        def build(rng: random.Random, deception=deception, length=length):
            if cfg.shortcut_neutral:
                return build_hitom_story(cfg, rng, deception, length, words, neutral.REVISIT_PROB, revisit_early_leavers=True)
            return build_hitom_story(cfg, rng, deception, length, words)

        if cfg.shortcut_neutral:  # one question per story, drawn with it (tomrl.generators.neutral)
            order = order_cycle[slot % len(order_cycle)]
            kept = neutral.draw_hitom(cfg, source, index, build, order, seen, picker, length, deception)
            story, text, story_id = kept.story, kept.text, kept.story_id
        else:
            story, text, story_id = _new_story(source, cfg.seed, index, build, lambda s: render_story(s.events, "hitom"), seen)
        oracle = BeliefOracle(story.events, story.setup, cfg.semantics)
        rederiving = _rederiving_oracle(text, "hitom", cfg)
        rng = random.Random(f"{source}-questions:{cfg.seed}:{index}")
        asked: set[tuple[str, ...]] = set()
        examples = []
        for k in range(per_story[index]):
            order = order_cycle[slot % len(order_cycle)]
            slot += 1
            query = kept.query if cfg.shortcut_neutral else hitom.question_query(rng, story, order, asked)
            question, answer, true_location = _labelled(oracle, rederiving, query, "hitom", story_id, story.target)
            examples.append(
                Example(
                    id=f"{story_id}-q{k}",
                    source=source,
                    split="train",
                    story=text,
                    question=question,
                    answer=answer,
                    order=order,
                    question_type=_hitom_question_type(order),
                    deception=deception,
                    story_length=length,
                    story_id=story_id,
                    choices=list(story.choices),
                    meta=hitom_meta(cfg, source, index, story, story.events, query, answer, true_location),
                )
            )
        stories.append((story_id, (deception, length), examples))
    if cfg.shortcut_neutral:  # slots follow the order and gold cycles: do not let file order show them
        random.Random(f"{source}-neutral-order:{cfg.seed}").shuffle(stories)
    return stories


def build_hitom_story(cfg: GenerateConfig, rng: random.Random, deception: bool, length: int, words, revisit_prob: float = 0.0,
                      revisit_early_leavers: bool = False):
    """One Hi-ToM story of ``length`` chapters drawn from ``rng`` with ``cfg``'s agents, distractors and
    return rule (plain examples and counterfactual pair members alike; the revisit options: see
    :func:`tomrl.generators.hitom.build_story`)."""
    return hitom.build_story(
        rng,
        chapters=length,
        deception=deception,
        agents=cfg.agents,
        distractor_prob=cfg.distractor_prob,
        last_mover_returns=cfg.last_mover_returns,
        words=words,
        revisit_prob=revisit_prob,
        revisit_early_leavers=revisit_early_leavers,
    )


def hitom_meta(cfg: GenerateConfig, source: str, index: int, story, events, query: Query, answer: str, true_location: str) -> dict:
    """The ``meta`` of a generated Hi-ToM example about ``story`` told as ``events`` (an edited
    story's events for a counterfactual pair member)."""
    return {
        "generator": source,
        "seed": cfg.seed,
        "story_index": index,
        "semantics": cfg.semantics,
        "query": _query_meta(query),
        "agents": list(story.agents),
        "chapter_rooms": list(story.chapter_rooms),
        "true_location": true_location,
        "first_location": story.setup.initial_locations[story.target],
        "tom": answer != true_location,
        "tells": _tells(events),
    }


def _labelled(oracle: BeliefOracle, rederiving, query, style: str, story_id: str, target: str) -> tuple[str, str, str]:
    """(question text, oracle answer, true location) for ``query``; the answer is re-derived from
    the rendered story text (:func:`_check_label`) before it becomes a label."""
    answer = oracle.answer(query)
    if answer is None:
        raise RuntimeError(f"story {story_id}: the oracle has no answer for {query}")
    question = render_question(query, style)
    _check_label(rederiving, question, answer, f"story {story_id}")
    return question, answer, oracle.reality(target)


def _tomi_stories(cfg: GenerateConfig, seen: set[str]) -> list[adversarial.Story]:
    source = "tomrl-tomi"
    n_stories = cfg.stories or cfg.n
    per_story = questions_per_story(cfg.n, n_stories)
    plan = random.Random(f"{source}-plan:{cfg.seed}")
    story_types = _balanced(list(cfg.tomi_story_types), n_stories, plan)
    slots = [s for s in tomi.TOMI_SLOTS if s[0] in cfg.tomi_question_types]
    noise = cfg.distractor_prob > 0
    words = vocabulary(cfg.vocabulary)
    picker = neutral.NeutralPicker(cfg.seed, source, cfg.neutral_nesting_share)
    stories: list[adversarial.Story] = []
    slot = 0
    for index in range(n_stories):
        story_type = story_types[index]

        def build(rng: random.Random, story_type=story_type):
            if cfg.shortcut_neutral:  # any story type that lets every place be asked will do
                story_type = rng.choice(cfg.tomi_story_types)
            return tomi.build_story(rng, story_type, noise=noise, words=words)

        if cfg.shortcut_neutral:  # one question per story, drawn with it (tomrl.generators.neutral)
            kept = neutral.draw_tomi(cfg, source, index, build, slots[slot % len(slots)][0], seen, picker)
            story, text, story_id = kept.story, kept.text, kept.story_id
        else:
            story, text, story_id = _new_story(source, cfg.seed, index, build, lambda s: render_story(s.events, "tomi"), seen)
        oracle = BeliefOracle(story.events, story.setup, cfg.semantics)
        rederiving = _rederiving_oracle(text, "tomi", cfg)
        examples = []
        for k in range(per_story[index]):
            question_type, roles = slots[slot % len(slots)]
            slot += 1
            if cfg.shortcut_neutral:
                query = kept.query  # its chain may ask the third agent C too (asked_agent 2)
                roles = tuple((story.mover, story.other).index(a) if a in (story.mover, story.other) else 2 for a in query.chain)
            else:
                query = tomi.slot_query(story, (question_type, roles))
            question, answer, true_location = _labelled(oracle, rederiving, query, "tomi", story_id, story.target)
            examples.append(
                Example(
                    id=f"{story_id}-q{k}",
                    source=source,
                    split="train",
                    story=text,
                    question=question,
                    answer=answer,
                    order=len(query.chain),
                    question_type=question_type,
                    deception=None,
                    story_length=len(story.events),
                    story_id=story_id,
                    choices=None,
                    meta={
                        "generator": source,
                        "seed": cfg.seed,
                        "story_index": index,
                        "semantics": cfg.semantics,
                        "query": _query_meta(query),
                        "agents": list(story.setup.agents),
                        "true_location": true_location,
                        "first_location": story.containers[0],
                        "tom": answer != true_location,
                        "tells": 0,
                        "story_type": story.story_type,
                        "asked_agent": roles[0] if roles else None,
                        "containers": list(story.containers),
                    },
                )
            )
        stories.append((story_id, (story.story_type,), examples))
    if cfg.shortcut_neutral:  # slots follow the question-type and gold cycles: do not let file order show them
        random.Random(f"{source}-neutral-order:{cfg.seed}").shuffle(stories)
    return stories


def _query_meta(query: Query) -> dict:
    return {"chain": list(query.chain), "object": query.obj, "kind": query.kind}


def _with_splits(stories: list[adversarial.Story], cfg: GenerateConfig) -> list[Example]:
    split_of = assign_splits([s[0] for s in stories], [s[1] for s in stories], cfg.split_fractions, cfg.seed)
    return [example.replace(split=split_of[story_id]) for story_id, _, examples in stories for example in examples]
