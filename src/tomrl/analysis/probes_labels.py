"""The belief probes' questions and labels: what the belief oracle says each question's agents believe.

    from tomrl.analysis.probes_labels import read_probe_questions, select_questions
    questions = read_probe_questions(["runs/demo/eval_sets/neutral.jsonl"])   # errors name file, row, field
    chosen = select_questions(questions, limit=100, seed=0)                     # seeded, stratified by order

Each question gets three targets, all from :class:`tomrl.world.oracle.BeliefOracle` run on the
story text (the oracle that labels the generated data; its answers are checked against the
row's ``answer`` and ``meta.true_location``):

``belief``
    the container the asked chain of agents (``meta.query.chain``) believes the object
    (``meta.query.object``) is in — the gold answer of a belief question; for an order-0
    question (empty chain) it is the true location;
``reality``
    the container the object really is in at the end of the story;
``false_belief``
    1 when the two differ, else 0 (always 0 at order 0).

Container names differ from story to story, so a container is encoded as its index in the
story's order of first mention: 0 for the container the story names first, 1 for the next new
one, and so on. The index is shared across stories, which is what a probe trained on some
stories and tested on others needs.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from tomrl.io import BadInputError
from tomrl.schema import Example, ReadReport, read_examples

TARGETS: dict[str, str] = {
    "belief": "the container the asked chain believes the object is in (index in the story's order of first mention)",
    "reality": "the container the object really is in (index in the story's order of first mention)",
    "false_belief": "1 when the asked chain's belief differs from the true location, else 0",
}


@dataclass(frozen=True)
class ProbeQuestion:
    """One question with the oracle's labels, encoded so they mean the same in every story."""

    example: Example
    where: str  # "file:line", for messages
    containers: tuple[str, ...]  # the story's containers in order of first mention
    belief: str
    reality: str

    @property
    def labels(self) -> dict[str, int]:
        return {
            "belief": self.containers.index(self.belief),
            "reality": self.containers.index(self.reality),
            "false_belief": int(self.belief != self.reality),
        }


def containers_by_first_mention(story: str, containers: Sequence[str]) -> tuple[str, ...]:
    """``containers`` sorted by where the story first names each one (unnamed ones left out)."""
    positions: dict[str, int] = {}
    for name in containers:
        found = re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", story)
        if found:
            positions[name] = found.start()
    return tuple(sorted(positions, key=lambda name: (positions[name], name)))


def _meta_field(meta: dict, dotted: str, kind: type, where: str):
    value: object = meta
    for part in dotted.split(".")[1:]:
        if not isinstance(value, dict) or part not in value:
            raise BadInputError(
                f"{where}: field '{dotted}': missing; the belief probes label a question with the belief oracle's "
                "query (meta.query.chain, meta.query.object) and meta.true_location, which tomrl's generators write "
                "(tomrl data generate hitom …)"
            )
        value = value[part]
    if not isinstance(value, kind) or (kind is list and not all(isinstance(agent, str) for agent in value)):
        raise BadInputError(f"{where}: field '{dotted}': expected {'a list of names' if kind is list else 'a string'}, "
                            f"got {type(value).__name__}")
    return value


def label_question(example: Example, where: str) -> ProbeQuestion:
    """The oracle's belief and reality for ``example``'s question; errors name ``where`` and the field."""
    from tomrl.rewards.fidelity import SOURCE_STYLES, world_from_story

    chain = tuple(_meta_field(example.meta, "meta.query.chain", list, where))
    obj = _meta_field(example.meta, "meta.query.object", str, where)
    true_location = _meta_field(example.meta, "meta.true_location", str, where)
    style = SOURCE_STYLES.get(example.source.lower())
    if style is None:
        raise BadInputError(f"{where}: field 'source': {example.source!r} has no story parser, so the belief oracle "
                            f"cannot label it (known: {', '.join(sorted(SOURCE_STYLES))})")
    semantics = example.meta.get("semantics", "joint")
    try:
        world = world_from_story(example.story, style, semantics)
    except Exception as error:  # a parser error: the story is not in the style its source names
        raise BadInputError(f"{where}: field 'story': not parseable as a {style} story: {error}") from error
    reality = world.oracle.reality(obj)
    belief = world.oracle.belief(chain, obj)
    if reality != true_location:
        raise BadInputError(f"{where}: field 'meta.true_location': {true_location!r}, but the oracle puts the "
                            f"{obj} in {reality!r} at the end of the story")
    if belief is None:
        raise BadInputError(f"{where}: field 'meta.query.chain': the oracle gives {' → '.join(chain)} no belief "
                            f"about the {obj}")
    kind = example.meta.get("query", {}).get("kind", "belief")
    if kind in ("belief", "reality") and belief != example.answer:
        raise BadInputError(f"{where}: field 'answer': {example.answer!r}, but the oracle says "
                            f"{' → '.join(chain) or 'reality'}: {belief!r}")
    containers = containers_by_first_mention(example.story, world.containers)
    for name, label in (("meta.true_location", reality), ("answer", belief)):
        if label not in containers:
            raise BadInputError(f"{where}: field '{name}': {label!r} is never named in the story")
    return ProbeQuestion(example, where, containers, belief, reality)


def read_probe_questions(paths: Sequence[str | Path]) -> list[ProbeQuestion]:
    """Every question of ``paths`` (unified JSONL) with its oracle labels; ids must be unique across files."""
    questions: list[ProbeQuestion] = []
    seen: dict[str, str] = {}
    for path in paths:
        report = ReadReport(str(path))
        for example in read_examples(path, report=report):
            where = f"{path}:{report.line_numbers[example.id]}"
            if example.id in seen:
                raise BadInputError(f"{where}: field 'id': {example.id!r} is also in {seen[example.id]}")
            if example.order is None:
                raise BadInputError(f"{where}: field 'order': null; the probes are reported per order of belief")
            seen[example.id] = where
            questions.append(label_question(example, where))
    return questions


def select_questions(questions: Sequence[ProbeQuestion], limit: int | None, seed: int) -> list[ProbeQuestion]:
    """At most ``limit`` questions, seeded and stratified by order: the orders take turns, so each
    order gets an equal share where it has the questions for it (and the others fill in)."""
    if limit is None or limit >= len(questions):
        return list(questions)
    by_order: dict[int, list[ProbeQuestion]] = defaultdict(list)
    for question in questions:
        by_order[question.example.order].append(question)  # type: ignore[index]
    rng = random.Random(seed)
    queues = []
    for order in sorted(by_order):
        group = list(by_order[order])
        rng.shuffle(group)
        queues.append(group)
    chosen: list[ProbeQuestion] = []
    while len(chosen) < limit:
        for queue in queues:
            if queue and len(chosen) < limit:
                chosen.append(queue.pop(0))
    order_of = {id(q): i for i, q in enumerate(questions)}
    return sorted(chosen, key=lambda q: order_of[id(q)])  # file order: the feature cache keys on ids, not order
