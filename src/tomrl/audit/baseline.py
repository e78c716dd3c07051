"""The no-ToM baseline of a set of questions: the better of the best agent-agnostic rule and the agent-blind learner.

    from tomrl.audit.baseline import no_tom_baseline
    baseline = no_tom_baseline(test_rows, train=train_rows)    # {"0": BestRule, ..., "all": BestRule}
    print(baseline["3"].rule, baseline["3"].accuracy.format(), baseline["3"].chance)

    tomrl data audit --train other_seed.jsonl --test test.jsonl    # both parts, side by side

Per order (keys as :func:`tomrl.audit.rules.best_rules`: ``str(order)``, ``"None"`` and
``"all"``) the result is whichever of :func:`tomrl.audit.rules.best_rules` (66 fixed rules read off
the order of events) and :func:`tomrl.audit.learner.learned_baseline` (classifiers on
agent-blind features, cross-fitted by story and, with ``train``, fitted on it) answers more of
that order's location questions right; ties go to the rule. Neither reads which agents a
question names. Its ``answers`` cover that order's questions, so callers can score it on any
subset; ``"all"`` answers each question with its order's choice. Both parts choose among
candidates on the audited questions themselves, so the baseline is optimistic: an upper
estimate of what a reader without Theory of Mind gets.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from tomrl.audit.learner import learned_baseline
from tomrl.audit.rules import FLAG_MARGIN, BestRule, best_rules
from tomrl.schema import Example
from tomrl.stats import Accuracy, accuracy, wilson_interval


def _pooled(parts: list[BestRule]) -> BestRule:
    """The per-order choices as one result ("by order"): counts, chances and held-out checks pooled."""
    n = sum(p.n for p in parts)
    k = sum(p.accuracy.k for p in parts)
    acc = accuracy([True] * k + [False] * (n - k))
    chance = sum(p.chance * p.n for p in parts) / n if n else 0.0
    held = [p.cross_validated for p in parts if p.cross_validated is not None]
    held_out = None
    if held:
        held_n, held_k = sum(h.n for h in held), sum(h.k for h in held)
        low, high = wilson_interval(held_k, held_n)
        held_out = Accuracy(n=held_n, k=held_k, value=held_k / held_n if held_n else 0.0, low=low, high=high)
    answers: dict[str, str | None] = {}
    for p in parts:
        answers.update(p.answers)
    margin = acc.value - chance
    return BestRule("by order", acc, chance, n, margin, margin > FLAG_MARGIN, held_out, answers)


def no_tom_baseline(examples: Iterable[Example], train: Sequence[Example] | None = None, seed: int = 0) -> dict[str, BestRule]:
    """Per order the better of the best rule and the best agent-blind learner (ties: the rule); ``"all"``
    answers each question with its order's choice. ``train``: also fit the learners on it."""
    examples = list(examples)
    rules = best_rules(examples)
    learned = learned_baseline(examples, train=train, seed=seed)
    result: dict[str, BestRule] = {}
    for key, rule in rules.items():
        if key == "all":
            continue
        other = learned.get(key)
        result[key] = other if other is not None and other.accuracy.value > rule.accuracy.value else rule
    if result:
        result["all"] = _pooled(list(result.values()))
    return result
