"""Check a neutral generator where the check can fail: fresh seeds, learners fitted elsewhere.

    tomrl data neutrality --config configs/generate/hitom_neutral_test.yaml --seeds 101,102,103
    tomrl data neutrality --config configs/generate/hitom_neutral_test.yaml --seeds 101,102,103 \\
        --train-config configs/generate/hitom_default.yaml --markdown neutrality.md --json neutrality.json
    tomrl data neutrality --config configs/generate/hitom_neutral_test.yaml --seeds 7,8,9 n=200 pairs=true 'orders=[0, 1, 2, 3]'
    tomrl data neutrality --config configs/generate/hitom_neutral_test.yaml --seeds 201,202,203 'orders=[0, 1, 2]' agents=4 \
        'lengths=[1]' 'deception=[false]' distractor_prob=0.0 --train-config configs/generate/hitom_default.yaml \
        --train-option 'lengths=[1]' --train-option 'deception=[false]' --train-option distractor_prob=0.0 \
        --train-option 'orders=[0, 1, 2]' --train-option agents=4 --train-option vocabulary=train   # the demo's neutral set

Filtering or balancing a set and then auditing that same set is circular: whatever the filter
looked at is balanced by construction. A sceptical reviewer instead draws **fresh seeds** of the
generator and attacks each with no-ToM answerers chosen or fitted *elsewhere*. For every seed
``s`` this command generates the set (the config with ``seed=s``; ``key=value`` overrides on top)
and reports, per ToM order, beside chance (a uniform pick among the places the object has been):

- ``rules``: the best of the 66 agent-agnostic rules of :mod:`tomrl.audit.rules`, the rule chosen
  on the *other* seeds' sets and scored on this one (the in-sample best of 66, which is what
  ``tomrl data audit`` prints and is optimistic by selection, is shown beside it, not judged);
- ``learner, cross-fitted``: the agent-blind learner of :mod:`tomrl.audit.learner`, cross-fitted
  by story on this set;
- ``learner, other seeds``: the learner fitted on the union of the *other* seeds' sets (the same
  generator) and tested on this one;
- ``learner, training``: the learner fitted on a training-distribution set (``--train-config``;
  e.g. the generator the models are trained on), tested on this one — "chance is not the floor":
  a set anti-correlated with the training shortcuts shows here as far *below* chance;
- ``partial ToM``: the partial-ToM rule (:mod:`tomrl.world.partial`: one agent's first-order
  belief for a nested question), chosen on the other seeds; and the share of nesting-required
  questions (orders >= 2);
- for contrast-pair sets, the same answerers' *pair* accuracy (both members right) per order beside
  the pair chance (the product of the members' chances), each chosen on the other seeds by pair
  accuracy. A contrast set is judged by these rows alone, and one-sided: its items are not meant to
  be neutral one by one (a witness edit makes one member's gold the place right after the move),
  its pairs are (no answer that ignores the edit or the swap gets both members right).

Wherever a family has several members (66 rules, two learners, six partial rules), the member is
chosen per group on the other seeds' sets, so no choice is made on the questions it is scored on.
Each figure is pooled over the seeds too (all seeds' questions together: the tightest interval).
Each judged answerer is ``within`` ``--margin`` points (default 5) of chance, ``OUTSIDE`` (further,
and its 95 % interval excludes chance) or ``inconclusive`` (further, but the interval includes chance:
the test lacks the power to tell; more seeds or a larger ``n=`` decide). A group's verdict is its
worst answerer's; the command exits 1 when a pooled group is OUTSIDE. Order 0 (where the object
really is: its last place by definition) is reported, never judged.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from tomrl.config import ConfigError, load_config
from tomrl.generators.config import GenerateConfig
from tomrl.schema import Example
from tomrl.stats import Accuracy, accuracy

# The learners (scikit-learn) and the generators are imported where they run, not here: every
# `tomrl` command line builds its parser by importing this module, and `--help` must stay fast.

DEFAULT_MARGIN = 0.05


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="generator config to check (configs/generate/*.yaml)")
    parser.add_argument("--seeds", required=True, help="fresh seeds, comma-separated (at least two), e.g. 101,102,103")
    parser.add_argument("--train-config", help="generator config of the training distribution (the learner is also fitted on it)")
    parser.add_argument("--train-n", type=int, help="questions drawn from --train-config (default: its own n)")
    parser.add_argument("--train-option", action="append", default=[], metavar="key=value",
                        help="a GenerateConfig key of the training distribution (repeatable), e.g. --train-option 'lengths=[1]'")
    parser.add_argument("--margin", type=float, default=100 * DEFAULT_MARGIN, help="points from chance a group may be (default 5)")
    parser.add_argument("--json", dest="json_out", help="write the numbers as JSON here")
    parser.add_argument("--markdown", help="write the Markdown table here")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="GenerateConfig keys applied on top of --config")


IN_SAMPLE = "rules, best in-sample (not judged)"
# Answerer families: each has members (rules, learners, partial rules); a family's member is chosen per
# group on the *other* seeds' sets and scored on this one, so no choice is made on the questions it scores.
FAMILIES = {
    "rules": "rules, chosen on other seeds",
    "learner, cross-fitted": "learner, cross-fitted by story",
    "learner, other seeds": "learner, fitted on other seeds",
    "learner, training": "learner, fitted on training",
    "partial": "partial ToM, chosen on other seeds",
}


PAIRS = "pairs (both right), order "  # + the pair's order: a contrast set is judged by its pairs, per order


@dataclass
class Scores:
    """One seed's set under attack: per family, per member, per question id whether it was right."""

    examples: list[Example]
    right: dict[str, dict[str, dict[str, bool]]] = field(default_factory=dict)  # family -> member -> id -> right
    chance: dict[str, float] = field(default_factory=dict)
    nesting: dict[str, bool] = field(default_factory=dict)  # id -> nesting required (orders >= 2 that parse)

    @functools.cached_property
    def partner(self) -> dict[str, str]:
        """Member 0 id -> member 1 id of each contrast pair (:func:`tomrl.generators.pairs.pair_units`)."""
        from tomrl.generators.pairs import pair_units

        return dict(pair_units(self.examples))

    @functools.cached_property
    def units(self) -> dict[str, list[str]]:
        """Group -> unit ids: each order's questions, and each order's contrast pairs (a pair's unit id is its first member's)."""
        groups: dict[str, list[str]] = {}
        order = {}
        for e in self.examples:
            order[e.id] = e.order
            if e.order is not None:
                groups.setdefault(str(e.order), []).append(e.id)
        for a in self.partner:
            groups.setdefault(f"{PAIRS}{order[a]}", []).append(a)
        return groups


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ConfigError(f"--seeds: expected comma-separated integers, got {text!r}") from None
    if len(seeds) < 2 or len(set(seeds)) != len(seeds):
        raise ConfigError(f"--seeds: give at least two distinct seeds (a learner is fitted on the others), got {text!r}")
    return seeds


def _score(answers: dict[str, str | None], examples: Sequence[Example]) -> dict[str, bool]:
    from tomrl.audit.heuristics import answers_match

    return {e.id: answers_match(answers.get(e.id), e.answer) for e in examples}


def attack(examples: list[Example], others: list[Example], train: list[Example] | None) -> Scores:
    """Every answerer of the module docstring on ``examples`` (a learner fitted on ``others`` and ``train``)."""
    from tomrl.audit.heuristics import is_location_question
    from tomrl.audit.learner import LEARNERS, cross_fitted_answers, fit_learner
    from tomrl.audit.partial import audit_questions
    from tomrl.audit.rules import RULE_FAMILY, rule_hits
    from tomrl.world.partial import PARTIAL_RULES

    located = [e for e in examples if is_location_question(e.question)]
    scores = Scores(located)
    rule_rows = {}
    for e in located:
        rule_rows[e.id], scores.chance[e.id] = rule_hits(e.story, e.question, e.answer)
    scores.right["rules"] = {name: {i: hits[k] for i, hits in rule_rows.items()} for k, name in enumerate(RULE_FAMILY)}
    fits: dict[str, list[Example] | None] = {"learner, cross-fitted": None, "learner, other seeds": others}
    if train is not None:
        fits["learner, training"] = train
    for family, fit_on in fits.items():
        scores.right[family] = {
            name: _score(cross_fitted_answers(located, name) if fit_on is None else fit_learner(fit_on, name).predict(located), located)
            for name in LEARNERS
        }
    audited = {i: q for i, q in audit_questions(located).items() if q is not None}  # orders >= 2 that parse
    if audited:
        partial_set = [e for e in located if e.id in audited]
        scores.right["partial"] = {name: _score({i: q.rule_answers[name] for i, q in audited.items()}, partial_set) for name in PARTIAL_RULES}
    scores.nesting = {i: q.nesting_required for i, q in audited.items()}
    return scores


def _unit_right(scores: Scores, group: str, values: dict[str, bool]) -> dict[str, bool]:
    ids = scores.units[group]
    if not group.startswith(PAIRS):
        return {i: values[i] for i in ids if i in values}
    other = scores.partner
    return {a: values[a] and values[other[a]] for a in ids if a in values and other[a] in values}


def _unit_chance(scores: Scores, group: str) -> dict[str, float]:
    ids = scores.units[group]
    if not group.startswith(PAIRS):
        return {i: scores.chance[i] for i in ids}
    other = scores.partner
    return {a: scores.chance[a] * scores.chance[other[a]] for a in ids}


def _mean(values: dict[str, bool]) -> float:
    return sum(values.values()) / len(values) if values else 0.0


def _chosen(per_seed: dict[int, Scores], seed: int, family: str, group: str) -> dict[str, bool]:
    """The family's member with the best accuracy on the other seeds' units of ``group``, scored on ``seed``."""
    members = per_seed[seed].right.get(family, {})
    if not members:
        return {}

    def elsewhere(member: str) -> float:
        pooled: dict[str, bool] = {}
        for other, scores in per_seed.items():
            if other != seed and member in scores.right.get(family, {}) and group in scores.units:
                pooled.update(_unit_right(scores, group, scores.right[family][member]))
        return _mean(pooled)

    best = max(members, key=elsewhere)  # ties: the first member
    return _unit_right(per_seed[seed], group, members[best])


def _group_rows(per_seed: dict[int, Scores], margin: float) -> list[dict[str, Any]]:
    """One row per (seed or "pooled", group), JSON-ready."""
    groups = sorted({g for scores in per_seed.values() for g in scores.units}, key=lambda g: (g.startswith(PAIRS), g))
    contrast = any(g.startswith(PAIRS) for g in groups)
    rows = []
    for group in groups:
        pooled_right: dict[str, dict[str, bool]] = {}
        pooled_chance: dict[str, float] = {}
        pooled_nesting: dict[str, bool] = {}
        pooled_members: dict[str, dict[str, bool]] = {}
        for seed, scores in per_seed.items():
            if group not in scores.units:
                continue
            chance = _unit_chance(scores, group)
            right = {title: _chosen(per_seed, seed, family, group) for family, title in FAMILIES.items()}
            members = {rule: _unit_right(scores, group, values) for rule, values in scores.right["rules"].items()}
            right[IN_SAMPLE] = max(members.values(), key=_mean) if members else {}
            nesting = {i: scores.nesting[i] for i in chance if i in scores.nesting}
            rows.append(_row(seed, group, chance, right, nesting, margin, contrast))
            for title, values in right.items():
                if title != IN_SAMPLE:
                    pooled_right.setdefault(title, {}).update(values)
            for name, values in members.items():
                pooled_members.setdefault(name, {}).update(values)
            pooled_chance.update(chance)
            pooled_nesting.update(nesting)
        pooled_right[IN_SAMPLE] = max(pooled_members.values(), key=_mean) if pooled_members else {}
        rows.append(_row("pooled", group, pooled_chance, pooled_right, pooled_nesting, margin, contrast))
    return rows


def _row(seed, group: str, chance: dict[str, float], right: dict[str, dict[str, bool]], nesting: dict[str, bool], margin: float,
         contrast: bool) -> dict[str, Any]:
    pair_row = group.startswith(PAIRS)
    # Order 0 asks where the object really is: its last place, by definition. A contrast set is judged by its pairs,
    # one-sided (no answer that ignores the edit or the swap can get both members; below chance is the design).
    judged = not group.endswith(" 0") and group != "0" and (pair_row or not contrast)
    answerers: dict[str, Any] = {}
    worst = 0.0
    verdicts = []
    for title, values in right.items():
        if not values:
            continue
        acc: Accuracy = accuracy(list(values.values()))
        chance_here = sum(chance[i] for i in values) / len(values)
        verdict = answerer_verdict(acc, chance_here, margin, one_sided=pair_row)
        answerers[title] = {**acc.to_dict(), "chance": chance_here, "margin": acc.value - chance_here, "verdict": verdict}
        if title != IN_SAMPLE:
            worst = max(worst, abs(acc.value - chance_here))
            verdicts.append(verdict)
    return {
        "seed": seed,
        "group": group,
        "n": len(chance),
        "chance": sum(chance.values()) / len(chance) if chance else 0.0,
        "answerers": answerers,
        "nesting_required": (sum(nesting.values()) / len(nesting)) if nesting else None,
        "worst_margin": worst,
        "verdict": min(verdicts, key=VERDICTS.index, default=WITHIN) if judged else NOT_JUDGED,
    }


WITHIN, INCONCLUSIVE, OUTSIDE = "within", "inconclusive", "OUTSIDE"
VERDICTS = (OUTSIDE, INCONCLUSIVE, WITHIN)  # worst first


NOT_JUDGED = "reported, not judged"


def answerer_verdict(acc: Accuracy, chance: float, margin: float, one_sided: bool = False) -> str:
    """``within``: no more than ``margin`` from chance (``one_sided``: above it); ``OUTSIDE``: further,
    and the 95 % interval excludes chance (a real difference); ``inconclusive``: further, but the
    interval includes chance (this n cannot tell it from noise: more seeds or a larger ``n`` can)."""
    distance = acc.value - chance if one_sided else abs(acc.value - chance)
    if distance <= margin + 1e-12:
        return WITHIN
    return OUTSIDE if (acc.low > chance or (acc.high < chance and not one_sided)) else INCONCLUSIVE


def check(cfg: GenerateConfig, seeds: Sequence[int], train_cfg: GenerateConfig | None, margin: float = DEFAULT_MARGIN,
          progress=None) -> dict[str, Any]:
    """Generate ``cfg`` on each seed, attack each (see the module docstring); the JSON-ready result."""
    from tomrl.generators.dataset import generate

    started = time.time()
    sets = {}
    for seed in seeds:
        sets[seed] = generate(replace(cfg, seed=seed))
        if progress:
            progress(f"seed {seed}: {len(sets[seed])} questions generated ({time.time() - started:.0f} s)")
    train = generate(train_cfg) if train_cfg is not None else None
    per_seed = {}
    for seed in seeds:
        others = [e for s in seeds if s != seed for e in sets[s]]
        per_seed[seed] = attack(sets[seed], others, train)
        if progress:
            progress(f"seed {seed}: attacked ({time.time() - started:.0f} s)")
    rows = _group_rows(per_seed, margin)
    judged = [r for r in rows if r["seed"] == "pooled" and r["verdict"] != NOT_JUDGED]
    return {
        "seeds": list(seeds),
        "margin": margin,
        "train": None if train_cfg is None else {"benchmark": train_cfg.benchmark, "n": train_cfg.n, "seed": train_cfg.seed},
        "rows": rows,
        "passed": all(r["verdict"] != OUTSIDE for r in judged),
        "inconclusive": [r["group"] for r in judged if r["verdict"] == INCONCLUSIVE],
        "seconds": round(time.time() - started, 1),
    }


def _cell(answerer: dict | None) -> str:
    if not answerer:
        return "-"
    return f"{100 * answerer['value']:.1f} [{100 * answerer['low']:.1f}, {100 * answerer['high']:.1f}] ({100 * answerer['margin']:+.1f})"


def to_markdown(result: dict[str, Any], title: str) -> str:
    names: list[str] = []
    for row in result["rows"]:
        for name in row["answerers"]:
            if name not in names:
                names.append(name)
    lines = [f"# Neutrality on fresh seeds: {title}", ""]
    lines.append(
        f"Seeds {', '.join(map(str, result['seeds']))}; accuracy % [95 % Wilson interval] (points from chance). Verdict: 'within' "
        f"when every judged answerer is within {100 * result['margin']:.0f} points of chance, 'OUTSIDE' when one is further and its "
        "interval excludes chance, else 'inconclusive'. Members (rule, learner, partial rule) are chosen on the other seeds. "
        "Pooled rows hold all seeds' questions."
    )
    lines.append("")
    header = ["seed", "group", "n", "chance", *names, "nesting required", "verdict"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for row in result["rows"]:
        nesting = "-" if row["nesting_required"] is None else f"{100 * row['nesting_required']:.0f} %"
        cells = [str(row["seed"]), row["group"], str(row["n"]), f"{100 * row['chance']:.1f}",
                 *[_cell(row["answerers"].get(name)) for name in names], nesting, row["verdict"]]
        lines.append("| " + " | ".join(cells) + " |")
    if not result["passed"]:
        overall = "some pooled group is OUTSIDE the margin (its interval excludes chance)"
    elif result["inconclusive"]:
        overall = f"no pooled group OUTSIDE; inconclusive at this n: {', '.join(result['inconclusive'])}"
    else:
        overall = "every judged pooled group within the margin"
    lines += ["", f"Overall: {overall} ({result['seconds']} s)."]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from tomrl.io import atomic_write_json, atomic_write_text
    from tomrl.outputs import check_outputs

    seeds = _seeds(args.seeds)
    if not 0 < args.margin < 100:
        raise ConfigError(f"--margin: points between 0 and 100, got {args.margin}")
    cfg = load_config(GenerateConfig, args.config, list(args.overrides))
    train_cfg = (load_config(GenerateConfig, args.train_config, [*args.train_option, *([f"n={args.train_n}"] if args.train_n else [])])
                 if args.train_config else None)
    if train_cfg is not None and train_cfg.benchmark != cfg.benchmark:
        raise ConfigError(f"--train-config: benchmark {train_cfg.benchmark} differs from --config's {cfg.benchmark}")
    check_outputs({"--json": args.json_out, "--markdown": args.markdown}, inputs={
        "--config": args.config, "--train-config": args.train_config,
        "exclude_stories_from": [*cfg.exclude_stories_from, *(train_cfg.exclude_stories_from if train_cfg else [])]})
    result = check(cfg, seeds, train_cfg, args.margin / 100, progress=lambda text: print(text, file=sys.stderr))
    markdown = to_markdown(result, args.config + (" " + " ".join(args.overrides) if args.overrides else ""))
    print(markdown)
    if args.markdown is not None:
        atomic_write_text(args.markdown, markdown)
    if args.json_out is not None:
        atomic_write_json(args.json_out, result)
    return 0 if result["passed"] else 1
