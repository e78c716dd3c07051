"""Label balance: how the gold answers are distributed, and where in the story they sit.

    from tomrl.audit.balance import label_balance
    rows = label_balance(examples)    # one BalanceRow per (source, order)

For each data set and order: the number of distinct answers, the most common ones, the
accuracy of always answering the most common one (with its Wilson interval: a prior-only
baseline), the normalised entropy of the answers, and — for location questions — where the gold
location stands among the locations of the story in order of first mention: the first one named,
the last one, another one, or not named in the story at all. A data set whose answer is nearly
always the first or the last location named can be solved by position alone.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from tomrl.audit.heuristics import answers_match, is_location_question, normalise_answer, parse_story, read_question
from tomrl.schema import Example
from tomrl.stats import Accuracy, accuracy

POSITIONS = ("first", "last", "other", "absent")


@dataclass
class BalanceRow:
    source: str
    order: int | None
    n: int
    distinct_answers: int
    top_answers: list[tuple[str, int]]
    majority: Accuracy  # always answering the most common answer
    entropy: float  # answer entropy / log(distinct answers); 1 = uniform, 0 = one answer
    location_questions: int = 0
    positions: dict[str, int] = field(default_factory=dict)  # first/last/other/absent among the story's locations

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "order": self.order,
            "n": self.n,
            "distinct_answers": self.distinct_answers,
            "top_answers": [{"answer": a, "count": c} for a, c in self.top_answers],
            "majority_answer_accuracy": self.majority.to_dict(),
            "normalised_entropy": self.entropy,
            "location_questions": self.location_questions,
            "answer_position": self.positions,
        }


def answer_position(example: Example) -> str | None:
    """Where the gold answer stands among the story's locations: first, last, other or absent
    (``None`` for questions that do not ask for a location)."""
    if not is_location_question(example.question):
        return None
    facts = parse_story(example.story)
    info = read_question(facts, example.question)
    candidates = facts.rooms if info.asks_room else facts.containers
    hits = [i for i, c in enumerate(candidates) if answers_match(c, example.answer)]
    if not hits:
        return "absent"
    if hits[0] == 0:
        return "first"
    if hits[0] == len(candidates) - 1:
        return "last"
    return "other"


def _entropy(counts: Counter) -> float:
    total = sum(counts.values())
    if len(counts) < 2:
        return 0.0
    h = -sum(c / total * math.log(c / total) for c in counts.values())
    return h / math.log(len(counts))


def label_balance(examples: list[Example], top: int = 5) -> list[BalanceRow]:
    groups: dict[tuple[str, int | None], list[Example]] = {}
    for e in examples:
        groups.setdefault((e.source, e.order), []).append(e)
    rows = []
    for (source, order), members in sorted(groups.items(), key=lambda kv: (kv[0][0], -1 if kv[0][1] is None else kv[0][1])):
        counts = Counter(normalise_answer(e.answer) for e in members)
        majority_answer, _ = counts.most_common(1)[0]
        majority = accuracy([normalise_answer(e.answer) == majority_answer for e in members])
        positions = Counter(p for p in (answer_position(e) for e in members) if p is not None)
        rows.append(
            BalanceRow(
                source=source,
                order=order,
                n=len(members),
                distinct_answers=len(counts),
                top_answers=counts.most_common(top),
                majority=majority,
                entropy=_entropy(counts),
                location_questions=sum(positions.values()),
                positions={p: positions.get(p, 0) for p in POSITIONS},
            )
        )
    return rows
