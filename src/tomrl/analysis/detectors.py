"""Detectors of the failure modes both papers report: each a pure function, each with its evidence.

    from tomrl.analysis.detectors import detect_inverted_difficulty
    result = detect_inverted_difficulty({0: acc0, 1: acc1, 2: acc2, 3: acc3, 4: acc4}, subject="0.5B + RL")
    result.fired, result.verdict, result.evidence, result.explanation

The detectors take plain Python series and accuracies (:class:`tomrl.stats.Accuracy`), not
files; :mod:`tomrl.analysis.runs` maps run folders onto them and ``tomrl report`` prints their
results. Every decision is a significance decision at a stated family-wise level (95 % by
default), so a detector fires on evidence, not on any wiggle of a curve:

- **Reasoning collapse** (Paper A: ≤ 3B models shorten their responses by up to 88 % while the
  reward rises). Fires when, from the first to the last third of the same steps, the response
  length fell significantly and by at least ``min_relative_drop``, the reward rose
  significantly, and — when reasoning traces are available — the share of traces that state an
  agent's belief fell significantly. Shorter traces that still track beliefs are
  reported as such, not as collapse.
- **Entropy collapse** (the policy stops exploring: its mean token entropy falls towards zero,
  so GRPO's groups stop differing and its advantages vanish). Fires when, from the first to the
  last third of the logged steps, the mean token entropy fell significantly and by at least
  ``min_relative_drop`` (50 % by default); the same window change as for the response length.
- **Inverted difficulty** (Paper A's 0.5B model: 52 % on order 0 but 83 % on order 4; Paper B:
  94.2 % on unseen order 4). Fires when accuracy has a significant positive Cochran–Armitage trend
  with the order, or some higher order is significantly above some lower one; all these tests
  share one Bonferroni-corrected level.
- **Negative transfer** (Paper B: training on order 4 only drops order 1 by 31 points). Fires
  when a trained mixture is significantly below the base model on a task outside its training
  mixture (Bonferroni over all mixture × task pairs compared).
- **ID/OOD divergence** (Paper B: ID and OOD accuracy diverge as training goes on). Fires when
  in-distribution accuracy rose significantly from the first to the last evaluation, the gap to
  held-out accuracy widened significantly, and held-out accuracy did not rise significantly.

The statistics live in :mod:`tomrl.analysis.significance`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Collection, Mapping, Sequence

from tomrl.analysis.significance import (
    Interval,
    WindowChange,
    bonferroni_level,
    cochran_armitage_trend,
    difference_interval,
    from_counts,
    linear_combination_interval,
    minimal_detectable_difference,
    window_change,
    z_for,
)
from tomrl.stats import Accuracy

FIRED = "fired"
NOT_FIRED = "not fired"
NOT_ENOUGH_DATA = "not enough data"
INCONCLUSIVE = "inconclusive"  # verdicts start with it: the test could not have seen the effect it looks for
# Effects the papers report, used as the size a detector must be able to see before "not fired" means
# "absent": Paper A's 0.5B model scores 31 points more on order 4 than on order 0 (52 → 83 %), and
# Paper B's order-4-only training drops order 1 by 31 points.
REFERENCE_EFFECT = {"inverted_difficulty": 0.31, "negative_transfer": 0.31}


@dataclass(frozen=True)
class DetectorResult:
    """What a detector concluded, on what, and why."""

    name: str  # machine name, e.g. "reasoning_collapse"
    title: str  # for the report, e.g. "Reasoning collapse"
    subject: str  # what it was computed on (run, model, split)
    fired: bool
    verdict: str  # "fired", "not fired", "not enough data", or a more specific "not fired" reading
    explanation: str  # one paragraph in plain language
    evidence: tuple[tuple[str, str], ...] = ()  # (what, value) lines, accuracies with n and interval
    data: dict = field(default_factory=dict)  # the same numbers, JSON-able

    def to_dict(self) -> dict:
        return {
            "name": self.name, "title": self.title, "subject": self.subject, "fired": self.fired,
            "verdict": self.verdict, "explanation": self.explanation,
            "evidence": [list(line) for line in self.evidence], "data": self.data,
        }


@dataclass(frozen=True)
class BeliefCount:
    """Of ``traces`` reasoning traces sampled at ``step``, ``with_beliefs`` state an agent's belief."""

    step: float
    with_beliefs: int
    traces: int

    def __post_init__(self) -> None:
        if not 0 <= self.with_beliefs <= self.traces:
            raise ValueError(f"with_beliefs={self.with_beliefs} must be between 0 and traces={self.traces}")


@dataclass(frozen=True)
class StepShare:
    """Of ``traces`` traces logged at ``step``, ``hits`` have some property (e.g. mention every asked agent)."""

    step: float
    hits: int
    traces: int

    def __post_init__(self) -> None:
        if not 0 <= self.hits <= self.traces:
            raise ValueError(f"hits={self.hits} must be between 0 and traces={self.traces}")


def _pct(value: float) -> str:
    return f"{100 * value:.1f} %"


def _p(value: float) -> str:
    return f"{value:.2g}"


def _change_text(change: WindowChange, unit: str = "", digits: int = 1) -> str:
    unit = f" {unit}" if unit else ""
    return (f"{change.early_mean:.{digits}f} → {change.late_mean:.{digits}f}{unit}: {change.change:+.{digits}f} "
            f"[{change.low:+.{digits}f}, {change.high:+.{digits}f}] ({change.early_points} steps each; "
            f"noise sd {change.noise_sd:.3g}, AR(1) φ {change.noise_autocorrelation:.2f})")


def _steps_text(first: float, last: float) -> str:
    return f"step {first:g}" if first == last else f"steps {first:g}–{last:g}"


def _clean_series(steps: Sequence[float], *series: Sequence[float | None]) -> list[tuple[float, ...]]:
    """Rows ``(step, v1, v2, …)`` where every value is present and finite."""
    lengths = {len(steps), *(len(s) for s in series)}
    if len(lengths) != 1:
        raise ValueError(f"series differ in length: {sorted(lengths)}")
    rows = []
    for values in zip(steps, *series):
        if any(v is None or v != v or v in (float("inf"), float("-inf")) for v in values):
            continue
        rows.append(tuple(float(v) for v in values))
    return sorted(rows)


def _inconclusive_verdict(name: str, smallest_n: tuple[int, int], level: float) -> tuple[str, float] | None:
    """``(verdict, mde)`` when a test on these sample sizes could not see the papers' effect, else None.

    The minimal detectable effect is that of one comparison at ``level`` with 80 % power; the
    detector's Bonferroni-corrected tests see even less.
    """
    mde = minimal_detectable_difference(*smallest_n, level=level)
    if mde <= REFERENCE_EFFECT[name]:
        return None
    return (f"{INCONCLUSIVE} (n = {smallest_n[0]} and {smallest_n[1]}, minimal detectable effect "
            f"{100 * mde:.0f} points > the {100 * REFERENCE_EFFECT[name]:.0f} the papers report)"), mde


# --------------------------------------------------------------------------- reasoning collapse


def detect_reasoning_collapse(
    steps: Sequence[float],
    reward: Sequence[float | None],
    response_length: Sequence[float | None],
    belief_counts: Sequence[BeliefCount] | None = None,
    *,
    subject: str = "",
    min_relative_drop: float = 0.2,
    min_steps: int = 10,
    level: float = 0.95,
    beliefs_unmeasured_because: str = "no reasoning traces were logged",
    max_belief_drop: float = 0.2,
    context_shares: Mapping[str, Sequence[StepShare]] | None = None,
) -> DetectorResult:
    """Response length falling while reward rises, and (when traces exist) beliefs no longer stated.

    ``steps``, ``reward`` and ``response_length`` are per-step training means (missing values may
    be None). Length and reward are compared between the first and the last third of the logged
    steps (:func:`tomrl.analysis.significance.window_change`). ``belief_counts`` gives, for some
    steps, how many sampled traces state a belief (counted with the fidelity reward's parser);
    pass None when they cannot be counted and say why in ``beliefs_unmeasured_because``.
    "Still reasoning" needs the traces to rule out a fall of the belief share by more than
    ``max_belief_drop``; with fewer traces the verdict says the question is open.

    ``context_shares`` (name → per-step counts, e.g. "share of rollouts mentioning every asked
    agent") are compared the same way, first third against last third, and listed in the
    evidence; they describe the traces but do not change the verdict.
    """
    name, title = "reasoning_collapse", "Reasoning collapse"
    rows = _clean_series(steps, reward, response_length)
    context_evidence, context_data = [], {}
    for label, shares in (context_shares or {}).items():
        line, numbers = _share_change(shares, level)
        context_evidence.append((label, line))
        context_data[label] = numbers
    if len(rows) < min_steps:
        return DetectorResult(
            name, title, subject, False, NOT_ENOUGH_DATA,
            f"Only {len(rows)} training steps have both a reward and a response length; at least {min_steps} "
            "are needed to tell a trend from step-to-step noise.",
            (("steps with reward and length", str(len(rows))), *context_evidence),
            {"steps": len(rows), **({"context_shares": context_data} if context_data else {})},
        )
    xs = [r[0] for r in rows]
    length_change = window_change([r[2] for r in rows], level)
    reward_change = window_change([r[1] for r in rows], level)
    relative_change = length_change.relative_change

    evidence = [
        ("window", f"steps {xs[0]:g}–{xs[-1]:g} ({len(rows)} logged steps); first third vs last third"),
        ("response length", f"{_change_text(length_change, 'tokens')}; {100 * relative_change:+.1f} %"),
        ("reward", _change_text(reward_change, digits=3)),
    ]
    data: dict = {
        "steps": len(rows), "first_step": xs[0], "last_step": xs[-1], "length_change": length_change.to_dict(),
        "length_relative_change": relative_change, "reward_change": reward_change.to_dict(),
        "min_relative_drop": min_relative_drop, "level": level,
    }

    length_fell = length_change.significantly_negative and relative_change <= -min_relative_drop
    reward_rose = reward_change.significantly_positive

    belief_change: Interval | None = None
    counts = [c for c in (belief_counts or []) if c.traces > 0]
    if counts:
        counts = sorted(counts, key=lambda c: c.step)
        first, last = _split_counts(counts)
        belief_early = from_counts(sum(c.with_beliefs for c in first), sum(c.traces for c in first))
        belief_late = from_counts(sum(c.with_beliefs for c in last), sum(c.traces for c in last))
        belief_change = difference_interval(belief_late, belief_early, level)
        evidence.append((
            "share of traces stating a belief",
            f"{belief_early.format()} at {_steps_text(first[0].step, first[-1].step)} → "
            f"{belief_late.format()} at {_steps_text(last[0].step, last[-1].step)}; change {belief_change.format_points()}",
        ))
        data.update(belief_early=belief_early.to_dict(), belief_late=belief_late.to_dict(),
                    belief_change=belief_change.to_dict())
    else:
        evidence.append(("share of traces stating a belief", f"not measured: {beliefs_unmeasured_because}"))
    evidence += context_evidence
    if context_data:
        data["context_shares"] = context_data

    drop_text = f"{100 * -relative_change:.0f} %"
    if not length_fell:
        reason = (
            "its response length did not fall significantly" if not length_change.significantly_negative
            else f"its response length fell by only {drop_text}, less than the {100 * min_relative_drop:.0f} % this detector requires"
        )
        return DetectorResult(
            name, title, subject, False, NOT_FIRED,
            f"No sign of reasoning collapse: {reason} over steps {xs[0]:g}–{xs[-1]:g}. Collapse means the model "
            "stops writing out its reasoning while the reward keeps rising, as Paper A saw for models of 3B "
            "parameters and less.",
            tuple(evidence), data,
        )
    if not reward_rose:
        return DetectorResult(
            name, title, subject, False, NOT_FIRED,
            f"The responses got shorter ({drop_text} less from the first to the last third of training), but the "
            "reward did not rise significantly over the same steps, so the shortening did not come with the "
            "reward gains that mark reasoning collapse. It may still be worth reading the traces.",
            tuple(evidence), data,
        )
    if belief_change is not None and not belief_change.below_zero and belief_change.low < -max_belief_drop:
        return DetectorResult(
            name, title, subject, False, "shorter, beliefs unclear",
            f"The responses got {drop_text} shorter while the reward rose. The share of traces that name an agent's "
            f"belief did not fall significantly, but too few traces were read to rule out a fall of more than "
            f"{100 * max_belief_drop:.0f} points ({belief_change.format_points()}), so whether the model still "
            "tracks beliefs is open. Log more completions (validation answers) to settle it.",
            tuple(evidence), data,
        )
    if belief_change is not None and not belief_change.below_zero:
        return DetectorResult(
            name, title, subject, False, "shorter, still reasoning",
            f"The responses got {drop_text} shorter while the reward rose, but the share of traces that name an "
            "agent's belief did not fall significantly: the model writes less, yet still tracks who believes "
            "what. That is compression of the reasoning, not its collapse.",
            tuple(evidence), data,
        )
    if belief_change is None:
        explanation = (
            f"Reasoning collapse: the responses got {drop_text} shorter while the reward rose over the same "
            "steps, the pattern Paper A reports for small models (−88 % for 1.5B). Whether the shorter traces "
            f"still track beliefs is unchecked ({beliefs_unmeasured_because}); count belief statements in "
            "logged completions to confirm it."
        )
    else:
        explanation = (
            f"Reasoning collapse: the responses got {drop_text} shorter while the reward rose, and the share of "
            "traces that state an agent's belief fell significantly. The model is being rewarded for answers it "
            "no longer reasons its way to, so its accuracy gains say little about Theory of Mind."
        )
    return DetectorResult(name, title, subject, True, FIRED, explanation, tuple(evidence), data)


def _share_change(shares: Sequence[StepShare], level: float) -> tuple[str, dict]:
    """An evidence line and its numbers: the share in the first vs the last third of the steps."""
    shares = sorted((s for s in shares if s.traces > 0), key=lambda s: s.step)
    series = [{"step": s.step, **from_counts(s.hits, s.traces).to_dict()} for s in shares]
    if len(shares) < 2:
        return f"not measured: traces at {len(shares)} step(s), two or more needed", {"by_step": series}
    first, last = _split_counts(shares)
    early = from_counts(sum(s.hits for s in first), sum(s.traces for s in first))
    late = from_counts(sum(s.hits for s in last), sum(s.traces for s in last))
    change = difference_interval(late, early, level)
    line = (f"{early.format()} at {_steps_text(first[0].step, first[-1].step)} → {late.format()} at "
            f"{_steps_text(last[0].step, last[-1].step)}; change {change.format_points()}")
    return line, {"early": early.to_dict(), "late": late.to_dict(), "change": change.to_dict(), "by_step": series}


def _split_counts(counts: Sequence) -> tuple[list, list]:
    """Early and late thirds of the logged steps (one step each when fewer than three); any
    records with a ``step``."""
    steps = sorted({c.step for c in counts})
    third = max(1, len(steps) // 3)
    early_steps, late_steps = set(steps[:third]), set(steps[-third:])
    return [c for c in counts if c.step in early_steps], [c for c in counts if c.step in late_steps]


# --------------------------------------------------------------------------- entropy collapse


def detect_entropy_collapse(
    steps: Sequence[float],
    entropy: Sequence[float | None],
    *,
    subject: str = "",
    min_relative_drop: float = 0.5,
    min_steps: int = 10,
    level: float = 0.95,
) -> DetectorResult:
    """The policy's mean token entropy falling from the first to the last third of training.

    ``entropy``: per-step means of the policy's token entropy over the sampled completions (TRL
    logs it as ``entropy``, in nats; missing values may be None). The change between the first
    and the last third of the logged steps is the window change of the length detector
    (:func:`tomrl.analysis.significance.window_change`, AR(1) noise from first differences). It
    fires when the entropy fell significantly and by at least ``min_relative_drop`` of its early
    level. When the fall is not significant but its interval still allows a fall of that size,
    the verdict is "inconclusive": the steps are too noisy to rule collapse out.
    """
    name, title = "entropy_collapse", "Entropy collapse"
    rows = _clean_series(steps, entropy)
    if len(rows) < min_steps:
        return DetectorResult(
            name, title, subject, False, NOT_ENOUGH_DATA,
            f"Only {len(rows)} training steps have a logged entropy; at least {min_steps} are needed to tell a "
            "trend from step-to-step noise.",
            (("steps with entropy", str(len(rows))),), {"steps": len(rows)},
        )
    xs = [r[0] for r in rows]
    change = window_change([r[1] for r in rows], level)
    relative = change.relative_change
    evidence = (
        ("window", f"steps {xs[0]:g}–{xs[-1]:g} ({len(rows)} logged steps); first third vs last third"),
        ("mean token entropy", f"{_change_text(change, 'nats', digits=3)}; {100 * relative:+.1f} %"),
        ("threshold", f"a significant fall of at least {100 * min_relative_drop:.0f} % of the early level"),
    )
    data = {"steps": len(rows), "first_step": xs[0], "last_step": xs[-1], "entropy_change": change.to_dict(),
            "entropy_relative_change": relative, "min_relative_drop": min_relative_drop, "level": level}
    if change.early_mean <= 0:
        return DetectorResult(
            name, title, subject, False, NOT_ENOUGH_DATA,
            f"The logged entropy is {change.early_mean:.3g} nats over the first third of training, so a relative fall "
            "cannot be measured; the policy was deterministic (or the entropy was not computed) from the start.",
            evidence, data,
        )
    drop = -relative
    if change.significantly_negative and drop >= min_relative_drop:
        return DetectorResult(
            name, title, subject, True, FIRED,
            f"Entropy collapse: the policy's mean token entropy fell by {100 * drop:.0f} % "
            f"({change.early_mean:.3g} → {change.late_mean:.3g} nats) from the first to the last third of training. "
            "A policy this sure of every token samples nearly the same completion in each group, so GRPO's "
            "advantages vanish and training stops exploring; together with a shrinking response it is the "
            "collapse Paper A reports for small models. An entropy bonus (entropy_coef) or a higher sampling "
            "temperature counters it.",
            evidence, data,
        )
    possible_drop = -change.low / change.early_mean
    if not change.significantly_negative and possible_drop >= min_relative_drop:
        data["largest_fall_allowed"] = possible_drop
        return DetectorResult(
            name, title, subject, False,
            f"{INCONCLUSIVE} (the interval allows a fall of up to {100 * possible_drop:.0f} %)",
            f"Inconclusive: the entropy did not fall significantly, but its per-step noise is large enough that a fall of "
            f"{100 * min_relative_drop:.0f} % or more cannot be ruled out. Log more steps to settle it.",
            evidence, data,
        )
    if change.significantly_negative:
        explanation = (f"The entropy fell by {100 * drop:.0f} %, significantly but less than the "
                       f"{100 * min_relative_drop:.0f} % this detector calls collapse: the policy grew surer, yet it "
                       "still samples varied completions.")
    else:
        explanation = (f"No entropy collapse: the mean token entropy did not fall significantly over steps "
                       f"{xs[0]:g}–{xs[-1]:g} ({100 * relative:+.0f} %), so the policy keeps exploring.")
    return DetectorResult(name, title, subject, False, NOT_FIRED, explanation, evidence, data)


# --------------------------------------------------------------------------- inverted difficulty


def detect_inverted_difficulty(
    accuracy_by_order: Mapping[int, Accuracy],
    *,
    subject: str = "",
    level: float = 0.95,
) -> DetectorResult:
    """Accuracy that rises with the order of belief, beyond what the intervals allow by chance."""
    name, title = "inverted_difficulty", "Inverted difficulty"
    orders = sorted(o for o, acc in accuracy_by_order.items() if acc.n > 0)
    evidence = [(f"order {o}", accuracy_by_order[o].format()) for o in orders]
    if len(orders) < 2:
        return DetectorResult(
            name, title, subject, False, NOT_ENOUGH_DATA,
            "Accuracy by order needs at least two orders with answered questions.",
            tuple(evidence), {"orders": orders},
        )
    pairs = list(combinations(orders, 2))
    tests = 1 + len(pairs)
    test_level = bonferroni_level(level, tests)
    trend = cochran_armitage_trend([(o, accuracy_by_order[o].k, accuracy_by_order[o].n) for o in orders])
    trend_up = trend.z > z_for(test_level)
    inversions = []
    comparisons = []
    for low_order, high_order in pairs:
        diff = difference_interval(accuracy_by_order[high_order], accuracy_by_order[low_order], test_level)
        comparisons.append({"lower": low_order, "higher": high_order, "difference": diff.to_dict()})
        if diff.above_zero:
            inversions.append((low_order, high_order, diff))
    evidence.append(("trend with order (Cochran–Armitage)",
                     f"z = {trend.z:+.2f}, p = {_p(trend.p_value)}; significant rise needs z > {z_for(test_level):.2f}"))
    if inversions:
        for low_order, high_order, diff in inversions:
            evidence.append((f"order {high_order} − order {low_order}", f"{diff.format_points()} ({100 * test_level:.2f} % interval)"))
    else:
        evidence.append(("higher order significantly above a lower one", "none"))
    evidence.append(("multiple comparisons", f"{tests} tests at {100 * test_level:.2f} % each (Bonferroni, family-wise {100 * level:.0f} %)"))
    data = {
        "accuracy_by_order": {str(o): accuracy_by_order[o].to_dict() for o in orders},
        "trend": {"z": trend.z, "p_value": trend.p_value, "n": trend.n}, "trend_significant": trend_up,
        "comparisons": comparisons, "tests": tests, "test_level": test_level, "level": level,
    }
    if not (trend_up or inversions):
        extremes = (accuracy_by_order[orders[0]].n, accuracy_by_order[orders[-1]].n)
        underpowered = _inconclusive_verdict(name, extremes, test_level)
        if underpowered is not None:
            verdict, mde = underpowered
            data["minimal_detectable_effect"] = mde
            evidence.append(("power", f"order {orders[-1]} vs order {orders[0]}: minimal detectable difference "
                                      f"{100 * mde:.0f} points (80 % power)"))
            return DetectorResult(
                name, title, subject, False, verdict,
                "Inconclusive: accuracy does not rise significantly with the order, but with this few questions per "
                "order even an inversion as large as Paper A's (52 % on order 0, 83 % on order 4) could be missed. "
                "Evaluate more questions per order before calling difficulty 'not inverted'.",
                tuple(evidence), data,
            )
        return DetectorResult(
            name, title, subject, False, NOT_FIRED,
            "No inverted difficulty: accuracy does not rise with the order of belief beyond what chance allows "
            "at these sample sizes. Deeper nesting (\"where does A think B thinks …\") should be harder, and here "
            "it is not measurably easier.",
            tuple(evidence), data,
        )
    what = []
    if trend_up:
        what.append("accuracy rises significantly with the order")
    if inversions:
        low_order, high_order, diff = max(inversions, key=lambda item: item[2].value)
        what.append(f"order {high_order} scores {100 * diff.value:.0f} points above order {low_order}")
    return DetectorResult(
        name, title, subject, True, FIRED,
        f"Inverted difficulty: {' and '.join(what)}. Nested beliefs should be harder than simple ones, so a model "
        "that does better on them is probably exploiting how the questions are built rather than tracking "
        "beliefs — in Hi-ToM, answering with the object's first stated location is right more often as the order "
        "rises. Check the shortcut comparison below.",
        tuple(evidence), data,
    )


# --------------------------------------------------------------------------- negative transfer


def detect_negative_transfer(
    base: Mapping[str, Accuracy],
    trained: Mapping[str, Mapping[str, Accuracy]],
    in_distribution: Mapping[str, Collection[str]] | None = None,
    *,
    subject: str = "",
    level: float = 0.95,
) -> DetectorResult:
    """A trained mixture significantly below the base model on a task it was not trained on.

    ``base``: task → base-model accuracy; ``trained``: mixture → task → accuracy;
    ``in_distribution``: mixture → the tasks it trained on (left out of the comparison). Where a
    mixture's training tasks are unknown, all its tasks are compared and the report says so.
    """
    name, title = "negative_transfer", "Negative transfer"
    in_distribution = in_distribution or {}
    candidates = []
    for mixture, tasks in trained.items():
        trained_on = set(in_distribution.get(mixture, ()))
        for task, acc in tasks.items():
            if task in trained_on or task not in base or acc.n == 0 or base[task].n == 0:
                continue
            candidates.append((mixture, task, acc))
    if not candidates:
        return DetectorResult(
            name, title, subject, False, NOT_ENOUGH_DATA,
            "No task outside a training mixture was evaluated for both the base model and a trained model, so "
            "transfer cannot be measured. Evaluate the base model and each trained model on the same held-out tasks.",
            (), {"comparisons": []},
        )
    test_level = bonferroni_level(level, len(candidates))
    comparisons = []
    drops = []
    for mixture, task, acc in candidates:
        diff = difference_interval(acc, base[task], test_level)
        comparisons.append({"mixture": mixture, "task": task, "base": base[task].to_dict(), "trained": acc.to_dict(),
                            "difference": diff.to_dict(), "significant_drop": diff.below_zero})
        if diff.below_zero:
            drops.append((mixture, task, acc, diff))
    unknown = sorted(m for m in trained if m not in in_distribution)
    evidence = [("comparisons", f"{len(candidates)} mixture × held-out task pairs, each at {100 * test_level:.2f} % "
                                f"(Bonferroni, family-wise {100 * level:.0f} %)")]
    if unknown:
        evidence.append(("mixtures with unknown training tasks (all their tasks compared)", ", ".join(unknown)))
    for mixture, task, acc, diff in drops:
        evidence.append((f"{mixture} on {task}", f"{acc.format()} vs base {base[task].format()}: {diff.format_points()}"))
    if not drops:
        worst = min(comparisons, key=lambda c: c["difference"]["value"])
        evidence.append(("largest drop (not significant)",
                         f"{worst['mixture']} on {worst['task']}: {Interval(**worst['difference']).format_points()}"))
    data = {"comparisons": comparisons, "tests": len(candidates), "test_level": test_level, "level": level,
            "unknown_training_tasks": unknown}
    if not drops:
        floor = sorted({c[1] for c in candidates if base[c[1]].k == 0})
        smallest = min(candidates, key=lambda c: min(c[2].n, base[c[1]].n))
        underpowered = _inconclusive_verdict(name, (smallest[2].n, base[smallest[1]].n), test_level)
        if len(floor) == len({c[1] for c in candidates}):
            data["base_at_zero"] = floor
            return DetectorResult(
                name, title, subject, False, f"{INCONCLUSIVE} (the base model scores 0 % on every compared task)",
                "Inconclusive: the base model answers none of these questions, so no trained model can fall below it; "
                "the test is vacuous here. Compare against a base that scores above zero (or a warm-started model).",
                tuple(evidence), data,
            )
        if underpowered is not None:
            verdict, mde = underpowered
            data["minimal_detectable_effect"] = mde
            return DetectorResult(
                name, title, subject, False, verdict,
                "Inconclusive: no significant drop, but these sample sizes could miss a drop as large as Paper B's "
                "(31 points).",
                tuple(evidence), data,
            )
        return DetectorResult(
            name, title, subject, False, NOT_FIRED,
            "No negative transfer: no trained mixture scores significantly below the base model on a task it was "
            "not trained on. (Not being worse is not the same as generalizing; see the generalization matrix.)",
            tuple(evidence), data,
        )
    mixture, task, acc, diff = min(drops, key=lambda item: item[3].value)
    return DetectorResult(
        name, title, subject, True, FIRED,
        f"Negative transfer: training made the model worse on tasks it did not train on — the largest drop is "
        f"{mixture} on {task}, {100 * -diff.value:.0f} points below the base model. Paper B saw the same when "
        "training on 4th-order questions only dropped 1st-order accuracy by 31 points: RL fitted the training "
        "mixture's answer patterns instead of a general skill.",
        tuple(evidence), data,
    )


# --------------------------------------------------------------------------- ID/OOD divergence


def detect_id_ood_divergence(
    steps: Sequence[float],
    id_accuracy: Sequence[Accuracy],
    ood_accuracy: Sequence[Accuracy],
    *,
    subject: str = "",
    id_label: str = "in-distribution",
    ood_label: str = "held-out",
    level: float = 0.95,
    missing_because: str = "",
) -> DetectorResult:
    """In-distribution accuracy rising over training while held-out accuracy stays flat or falls.

    Compares the first and the last evaluation where both accuracies were measured: the ID gain,
    the OOD gain and the change of the gap ``(ID_last − ID_first) − (OOD_last − OOD_first)``,
    each with a MOVER-Wilson interval. ``missing_because`` says, when there is not enough data,
    what the caller knows to be missing.
    """
    name, title = "id_ood_divergence", "ID/OOD divergence"
    if not len(steps) == len(id_accuracy) == len(ood_accuracy):
        raise ValueError("steps, id_accuracy and ood_accuracy differ in length")
    points = sorted((s, a, b) for s, a, b in zip(steps, id_accuracy, ood_accuracy) if a.n > 0 and b.n > 0)
    if len(points) < 2:
        return DetectorResult(
            name, title, subject, False, NOT_ENOUGH_DATA,
            f"Divergence needs {id_label} and {ood_label} accuracy at two or more evaluations during training; "
            f"{len(points)} found" + (f": {missing_because}." if missing_because else "."),
            (), {"evaluations": len(points)},
        )
    (s0, id0, ood0), (s1, id1, ood1) = points[0], points[-1]
    id_gain = difference_interval(id1, id0, level)
    ood_gain = difference_interval(ood1, ood0, level)
    gap_change = linear_combination_interval([(1, id1), (-1, id0), (-1, ood1), (1, ood0)], level)
    evidence = (
        (f"{id_label}", f"step {s0:g}: {id0.format()} → step {s1:g}: {id1.format()}; gain {id_gain.format_points()}"),
        (f"{ood_label}", f"step {s0:g}: {ood0.format()} → step {s1:g}: {ood1.format()}; gain {ood_gain.format_points()}"),
        ("change of the gap (ID gain − OOD gain)", gap_change.format_points()),
        ("evaluations", f"{len(points)} (steps {', '.join(f'{p[0]:g}' for p in points)})"),
    )
    data = {"first_step": s0, "last_step": s1, "id_first": id0.to_dict(), "id_last": id1.to_dict(),
            "ood_first": ood0.to_dict(), "ood_last": ood1.to_dict(), "id_gain": id_gain.to_dict(),
            "ood_gain": ood_gain.to_dict(), "gap_change": gap_change.to_dict(), "level": level,
            "series": [{"step": s, "id": a.to_dict(), "ood": b.to_dict()} for s, a, b in points]}
    if not id_gain.above_zero:
        return DetectorResult(
            name, title, subject, False, NOT_FIRED,
            f"No divergence: {id_label} accuracy did not rise significantly between steps {s0:g} and {s1:g}, so "
            "training has not (yet) produced the in-distribution gains whose failure to transfer this detector looks for.",
            evidence, data,
        )
    if ood_gain.above_zero:
        return DetectorResult(
            name, title, subject, False, "partial transfer" if gap_change.above_zero else NOT_FIRED,
            f"No divergence: {ood_label} accuracy also rose significantly ({ood_gain.format_points()}), so part of "
            f"what training taught carries over beyond the training distribution"
            + (", though less than in distribution." if gap_change.above_zero else "."),
            evidence, data,
        )
    if not gap_change.above_zero:
        return DetectorResult(
            name, title, subject, False, NOT_FIRED,
            f"No clear divergence: {id_label} accuracy rose, {ood_label} accuracy did not rise significantly, but "
            "the gap between them did not widen significantly either; more held-out questions would tell.",
            evidence, data,
        )
    return DetectorResult(
        name, title, subject, True, FIRED,
        f"ID/OOD divergence: from step {s0:g} to {s1:g} {id_label} accuracy rose by {100 * id_gain.value:.0f} points "
        f"while {ood_label} accuracy {'fell' if ood_gain.value < 0 else 'stayed flat'} "
        f"({ood_gain.format_points()}). Training is fitting the training distribution rather than teaching a skill "
        "that transfers, the pattern Paper B reports (up to +65 points in distribution, < 5 held out).",
        evidence, data,
    )
