"""The partial-ToM audit: how many nested belief questions one agent's first-order belief answers.

    from tomrl.audit.partial import partial_tom, nesting_required_ids
    results = partial_tom(examples)               # {source: {order: PartialToMResult}}, orders >= 2
    r = results["hitom"][3]
    print(r.n, r.partially_answerable.format(), r.nesting_required.format(), r.best_rule, r.rules[r.best_rule].format(), r.chance)
    nesting_required_ids(examples)                # {example id: True when no named agent's own belief is the answer}

    tomrl data audit --test hitom --test data/hitom_neutral_test.jsonl    # the "Partial ToM" section

A question of order k >= 2 ("where does A think B thinks C thinks the O is?") is answered right
without nesting whenever the first-order belief of one agent of its chain is the gold. This audit
runs the belief oracle (:mod:`tomrl.world.oracle`) on each such question and records, with the
shared definitions of :mod:`tomrl.world.partial`:

- **partially answerable**: some agent of the chain believes, by itself, that the object is
  where the gold says (scored against the data set's gold with the shared strict matcher
  :func:`tomrl.audit.heuristics.answers_match`, as models are scored);
- **nesting-required**: :func:`tomrl.world.partial.nesting_required` — no agent of the chain has
  the oracle's nested answer as its own belief. Where the gold agrees with the oracle (always for
  tomrl's generators, 583/600 for Hi-ToM) the two are complements; ``n_label_differs`` counts the
  others;
- each rule of :data:`tomrl.world.partial.PARTIAL_RULES` (which one agent answers: first or last
  named, first or last to leave, oldest or newest knowledge): its accuracy with a 95 % Wilson
  interval, the best rule (ties: the earlier rule) and its margin over **chance** (the mean of
  :func:`tomrl.audit.rules.chance_of`: a uniform pick among the places the object has been in).
  A best rule more than :data:`tomrl.audit.rules.FLAG_MARGIN` above chance is ``flagged``.

Only location belief questions with an order >= 2 are audited. The story and question are parsed
with :func:`tomrl.world.parsers.parse_story` (style ``tomi`` for sources named so, else ``hitom``,
the other style tried next; a story on one line, as in ToM-RL's ``tomrl-paper-*`` copies, is first
put one sentence per line) and :func:`tomrl.world.parsers.parse_question`, under the oracle
semantics of ``example.meta["semantics"]`` (default ``"joint"``). A question that does not parse,
whose chain is shorter than 2, or which the oracle cannot answer (the chain never saw the object)
is counted in ``n_not_parsed`` and nothing else: ExploreToM, OpenToM and FANToM phrase their
questions otherwise, and the audit never fails on them.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable

from tomrl.audit.heuristics import answers_match, is_location_question
from tomrl.audit.rules import FLAG_MARGIN, chance_of
from tomrl.schema import Example
from tomrl.stats import Accuracy, accuracy
from tomrl.world.oracle import SEMANTICS, BeliefOracle
from tomrl.world.parsers import parse_question, parse_story
from tomrl.world.partial import PARTIAL_RULES, first_order_beliefs, nesting_required, partial_answers
from tomrl.world.world import Event

MIN_ORDER = 2


@dataclass(frozen=True)
class PartialToMQuestion:
    """What the oracle says about one nested location question."""

    id: str
    chain: tuple[str, ...]  # the agents the question names, in order
    obj: str
    oracle_answer: str  # the chain's belief by the oracle
    first_order: dict[str, str | None]  # each chain agent -> its own belief about the object
    rule_answers: dict[str, str | None]  # each rule of PARTIAL_RULES -> its answer
    partially_answerable: bool  # some agent's own belief matches the data set's gold
    nesting_required: bool  # no agent's own belief is the oracle's answer (tomrl.world.partial)
    label_agrees: bool  # the oracle's answer matches the data set's gold
    chance: float  # expected accuracy of a uniform pick among the object's places


@dataclass(frozen=True)
class PartialToMResult:
    """The partial-ToM audit of one data set's questions of one order."""

    source: str
    order: int
    n: int  # questions audited (parsed and answered by the oracle)
    n_not_parsed: int  # location questions of this order the parsers or the oracle could not read
    partially_answerable: Accuracy  # share of the n whose gold is one chain agent's own belief
    nesting_required: Accuracy  # share of the n that no chain agent's own belief answers (oracle)
    rules: dict[str, Accuracy]  # each rule of PARTIAL_RULES -> its accuracy on the n
    best_rule: str | None  # the rule of highest accuracy (None when n == 0)
    chance: float  # mean expected accuracy of a random pick among the object's places (0-1)
    n_label_differs: int  # questions whose gold differs from the oracle's answer

    @property
    def best(self) -> Accuracy | None:
        return self.rules[self.best_rule] if self.best_rule is not None else None

    @property
    def margin(self) -> float:
        """The best rule's accuracy minus chance (0-1); 0 when nothing was audited."""
        return self.best.value - self.chance if self.best is not None else 0.0

    @property
    def flagged(self) -> bool:
        """The best rule beats chance by more than FLAG_MARGIN."""
        return self.best is not None and self.margin > FLAG_MARGIN

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "order": self.order,
            "n": self.n,
            "n_not_parsed": self.n_not_parsed,
            "partially_answerable": self.partially_answerable.to_dict(),
            "nesting_required": self.nesting_required.to_dict(),
            "rules": {name: acc.to_dict() for name, acc in self.rules.items()},
            "best_rule": self.best_rule,
            "best": self.best.to_dict() if self.best is not None else None,
            "chance": self.chance,
            "margin": self.margin,
            "flagged": self.flagged,
            "n_label_differs": self.n_label_differs,
        }


def is_audited(example: Example) -> bool:
    """Whether the audit applies: a location question of order >= 2."""
    return example.order is not None and example.order >= MIN_ORDER and is_location_question(example.question)


def _styles(source: str) -> tuple[str, str]:
    return ("tomi", "hitom") if "tomi" in source.lower() else ("hitom", "tomi")


# ToM-RL's copies of Hi-ToM and ToMi (tomrl-paper-*) join a story's sentences on one line, and
# ToMi's distractors ("Mila loves the plum") have no period: put each sentence on its own line,
# which is what the parsers read.
_SENTENCE_END = re.compile(r"\.\s+(?=[A-Z0-9])")
_UNPUNCTUATED_DISTRACTOR = re.compile(r"\b((?:likes|dislikes|loves|hates) the [A-Za-z_]\w*) (?=[A-Z])")


def _one_sentence_per_line(story: str) -> str:
    return _UNPUNCTUATED_DISTRACTOR.sub("\\1\n", _SENTENCE_END.sub(".\n", story))


def _events(story: str, source: str) -> list[Event] | None:
    texts = [story]
    if len([line for line in story.splitlines() if line.strip()]) == 1:
        texts.append(_one_sentence_per_line(story))
    for text in texts:
        for style in _styles(source):
            try:
                return parse_story(text, style)  # type: ignore[arg-type]
            except ValueError:
                continue
    return None


class _Oracles:
    """One oracle per (story, semantics): the questions of a story share it."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str, str], BeliefOracle | None] = {}

    def get(self, example: Example) -> BeliefOracle | None:
        semantics = example.meta.get("semantics", "joint") if isinstance(example.meta, dict) else "joint"
        semantics = semantics if semantics in SEMANTICS else "joint"
        key = (example.story, example.source, semantics)
        if key not in self._cache:
            events = _events(example.story, example.source)
            self._cache[key] = BeliefOracle(events, semantics=semantics) if events is not None else None
        return self._cache[key]


def audit_question(example: Example, oracles: _Oracles | None = None) -> PartialToMQuestion | None:
    """The oracle's view of one audited question; None when it cannot be read (see the module docstring)."""
    oracle = (oracles or _Oracles()).get(example)
    if oracle is None:
        return None
    try:
        query = parse_question(example.question)
    except ValueError:
        return None
    if query.kind != "belief" or len(query.chain) < MIN_ORDER:
        return None
    gold_by_oracle = oracle.belief(query.chain, query.obj)
    if gold_by_oracle is None:
        return None
    beliefs = first_order_beliefs(oracle, query.chain, query.obj)
    return PartialToMQuestion(
        id=example.id,
        chain=query.chain,
        obj=query.obj,
        oracle_answer=gold_by_oracle,
        first_order=beliefs,
        rule_answers=partial_answers(oracle, query.chain, query.obj),
        partially_answerable=any(answers_match(belief, example.answer) for belief in beliefs.values()),
        nesting_required=nesting_required(oracle, query.chain, query.obj),
        label_agrees=answers_match(gold_by_oracle, example.answer),
        chance=chance_of(example.story, example.question, example.answer),
    )


def audit_questions(examples: Iterable[Example]) -> dict[str, PartialToMQuestion | None]:
    """Every audited example's id -> its :class:`PartialToMQuestion` (None: not parsed)."""
    oracles = _Oracles()
    return {example.id: audit_question(example, oracles) for example in examples if is_audited(example)}


def nesting_required_ids(examples: Iterable[Example]) -> dict[str, bool]:
    """Example id -> whether it is nesting-required, for the parsed location questions of order >= 2."""
    return {key: question.nesting_required for key, question in audit_questions(examples).items() if question is not None}


def _result(source: str, order: int, audited: list[tuple[Example, PartialToMQuestion | None]]) -> PartialToMResult:
    read = [(e, q) for e, q in audited if q is not None]
    rules = {name: accuracy([answers_match(q.rule_answers[name], e.answer) for e, q in read]) for name in PARTIAL_RULES}
    best_rule = None
    if read:
        best_rule = max(rules, key=lambda name: (rules[name].k, -list(PARTIAL_RULES).index(name)))
    return PartialToMResult(
        source=source,
        order=order,
        n=len(read),
        n_not_parsed=len(audited) - len(read),
        partially_answerable=accuracy([q.partially_answerable for _, q in read]),
        nesting_required=accuracy([q.nesting_required for _, q in read]),
        rules=rules,
        best_rule=best_rule,
        chance=sum(q.chance for _, q in read) / len(read) if read else 0.0,
        n_label_differs=sum(not q.label_agrees for _, q in read),
    )


def partial_tom(examples: Iterable[Example]) -> dict[str, dict[int, PartialToMResult]]:
    """The partial-ToM audit per data set (``example.source``) and order (>= 2), orders ascending."""
    oracles = _Oracles()
    groups: dict[str, dict[int, list[tuple[Example, PartialToMQuestion | None]]]] = defaultdict(lambda: defaultdict(list))
    for example in examples:
        if is_audited(example):
            groups[example.source][example.order].append((example, audit_question(example, oracles)))  # type: ignore[index]
    return {
        source: {order: _result(source, order, members) for order, members in sorted(by_order.items())}
        for source, by_order in groups.items()
    }
