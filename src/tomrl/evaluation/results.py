"""From scored samples to ``results.json``: accuracies with 95 % intervals, per order and type.

    from tomrl.evaluation.results import summarize_benchmark
    summary = summarize_benchmark(rows, group_by=("order", "question_type"), interval="wilson")
    summary["overall"]["strict"]["accuracy"]      # {"n": 20, "k": 7, "value": 0.35, "low": …, "high": …, "method": "wilson"}

Each sample row (one line of ``samples.jsonl``) carries the checks of its benchmark's schemes:
``correct`` / ``format_ok`` / ``extracted`` / ``reason`` for ``strict``, prefixed per :data:`SCHEME_FIELDS`
for the others (``paper_`` for ``paper_eval``). Per scheme, the benchmark's metric (:data:`METRICS`) and
format-failure rate are each a :func:`rate` with its n and interval; nothing is reported without them. Contrast-pair
benchmarks also get :func:`summarize_pairs` (pair accuracy, answer unchanged within a pair). Benchmarks that
ask for it (recipe tasks) get :func:`no_tom_rules`: the best no-ToM baseline (rules and an agent-blind learner) on the very same questions,
overall and per group, to stand beside each accuracy.

Nested questions are also reported by whether they need nesting (``by_nesting``, flags from
:func:`tomrl.audit.partial.nesting_required_ids`): a location question of order >= 2 is
``"nesting required"`` when no agent it names has the answer as its own first-order belief, else
``"partially answerable"`` (one agent's own belief answers it). Accuracy on the first group is the
one a model cannot earn by tracking what one person saw. Other questions, and those the story
parsers cannot read, are in neither.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from tomrl.config import ConfigError
from tomrl.io import BadInputError, loads_json
from tomrl.stats import accuracy, bootstrap_interval

# Per scheme (tomrl.rewards.answer): the prefix of its fields in a sample row, and what it means (results.json).
SCHEME_FIELDS = {
    "strict": ("", "tomrl: well-formed <think>…</think><answer>…</answer> (prefill counted), answer equal to gold after normalisation"),
    "paper_eval": ("paper_", "Paper A's eval script: last <answer> tag, no format check, answer equal to or ending with the gold"),
    "paper": ("paper_reward_", "Paper A's training reward: the four tags once each and in order, last <answer>, suffix match"),
    "paper_b": ("paper_b_", "Paper B (tomrl's reading): Paper A's four-tag format, answer equal to gold after normalisation"),
}
# A benchmark's metric: what counts as a success in one sample under one scheme (field prefix).
METRICS: dict[str, Callable[[dict, str], bool]] = {"accuracy": lambda row, prefix: bool(row[f"{prefix}correct"])}
DEFAULT_SCHEMES = ("strict", "paper_eval")
# The groups of ``by_nesting`` (location questions of order >= 2): is the question nesting-required?
NESTING_GROUPS = {True: "nesting required", False: "partially answerable"}


def rate(flags: Sequence[bool], interval: str = "wilson", resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """``{"n", "k", "value", "low", "high", "method"}`` of a list of booleans (95 % interval)."""
    result = accuracy(list(flags)).to_dict()
    if interval == "bootstrap" and flags:
        low, high = bootstrap_interval([1.0 if f else 0.0 for f in flags], resamples=resamples, seed=seed)
        result.update(low=low, high=high, method=f"bootstrap-{resamples}")
    elif interval not in ("wilson", "bootstrap"):
        raise ValueError(f"interval must be wilson or bootstrap, got {interval!r}")
    return result


def summarize_group(rows: Sequence[dict], interval="wilson", resamples=2000, seed=0, schemes=DEFAULT_SCHEMES, metric="accuracy") -> dict[str, Any]:
    """n, each scheme's metric and format-failure rate, response length, finish reasons."""
    summary: dict[str, Any] = {"n": len(rows)}
    for scheme in schemes:
        prefix = SCHEME_FIELDS[scheme][0]
        summary[scheme] = {
            metric: rate([METRICS[metric](r, prefix) for r in rows], interval, resamples, seed),
            "format_failure": rate([not r[f"{prefix}format_ok"] for r in rows], interval, resamples, seed),
        }
    tokens = [r["tokens"] for r in rows]
    summary["mean_response_tokens"] = sum(tokens) / len(tokens) if tokens else 0.0
    summary["finish_reasons"] = dict(Counter(r["finish_reason"] for r in rows))
    return summary


def _group_key(value: Any) -> str:
    return "none" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def summarize_benchmark(
    rows: Sequence[dict],
    group_by: Iterable[str] = ("order", "question_type"),
    interval: str = "wilson",
    resamples: int = 2000,
    seed: int = 0,
    schemes: Sequence[str] = DEFAULT_SCHEMES,  # and metric: as the benchmark declares them
    metric: str = "accuracy",
    nesting: Mapping[str, bool] | None = None,
) -> dict[str, Any]:
    """Overall summary plus one per value of each ``group_by`` field (``by_order``, …).

    ``nesting`` (example id -> nesting-required, from :func:`tomrl.audit.partial.nesting_required_ids`
    on the examples: sample rows carry ids, not stories) adds ``by_nesting`` with the groups
    ``"nesting required"`` and ``"partially answerable"`` of the rows it names; absent when it names none.
    """
    result: dict[str, Any] = {"overall": summarize_group(rows, interval, resamples, seed, schemes, metric)}
    for field_name in group_by:
        groups: dict[str, list[dict]] = {}
        for row in rows:
            groups.setdefault(_group_key(row.get(field_name)), []).append(row)
        ordered = sorted(groups, key=lambda k: (not k.lstrip("-").isdigit(), int(k) if k.lstrip("-").isdigit() else 0, k))
        result[f"by_{field_name}"] = {key: summarize_group(groups[key], interval, resamples, seed, schemes, metric) for key in ordered}
    by_nesting = _nesting_groups(rows, nesting, lambda row: row["id"])
    if by_nesting:
        result["by_nesting"] = {key: summarize_group(members, interval, resamples, seed, schemes, metric) for key, members in by_nesting.items()}
    return result


# Meta keys of a contrast pair: (pair id, member index) -> the kind reported in results.json.
PAIR_KINDS = {("pair_id", "pair_member"): "counterfactual", ("swap_id", "swap_member"): "agent_swap"}


def summarize_pairs(
    samples: Sequence[tuple[Any, dict | None]], interval: str = "wilson", resamples: int = 2000, seed: int = 0, schemes: Sequence[str] = DEFAULT_SCHEMES
) -> dict[str, Any] | None:
    """Pair metrics of a contrast-pair benchmark (:mod:`tomrl.generators.pairs`), or None for others.

    ``samples``: (example, its sample row or None if unanswered) for every selected example. Only
    pairs with both members answered count (``n_pairs``; ``n_incomplete`` the others). Per scheme:
    ``item_accuracy`` (over the members of those pairs), ``pair_accuracy`` (both members right;
    the two gold answers differ, so no single answer can get both) and ``answer_unchanged``
    (pairs whose two extracted answers are equal after normalisation, over pairs where both
    have one: the signature of a shortcut that ignores the edit or the swap). Also per order.
    """
    kind = None
    members: dict[str, dict[int, tuple[Any, dict | None]]] = {}
    for example, row in samples:
        for (id_key, member_key), name in PAIR_KINDS.items():
            if id_key in example.meta:
                kind = name
                members.setdefault(example.meta[id_key], {})[example.meta[member_key]] = (example, row)
    if kind is None:
        return None
    complete = [
        (pair[0], pair[1]) for pair in members.values() if set(pair) == {0, 1} and all(row is not None for _, row in pair.values())
    ]
    summary: dict[str, Any] = {"kind": kind, **_pair_rates([(a[1], b[1]) for a, b in complete], interval, resamples, seed, schemes)}
    summary["n_incomplete"] = len(members) - len(complete)
    by_order: dict[str, list[tuple[dict, dict]]] = {}
    for first, second in complete:
        by_order.setdefault(_group_key(first[0].order), []).append((first[1], second[1]))
    summary["by_order"] = {key: _pair_rates(by_order[key], interval, resamples, seed, schemes) for key in sorted(by_order, key=lambda k: (len(k), k))}
    return summary


def _pair_rates(pairs: Sequence[tuple[dict, dict]], interval: str, resamples: int, seed: int, schemes: Sequence[str]) -> dict[str, Any]:
    from tomrl.rewards.answer import normalize

    result: dict[str, Any] = {"n_pairs": len(pairs)}
    for scheme in schemes:
        prefix = SCHEME_FIELDS[scheme][0]
        right = [(bool(a[f"{prefix}correct"]), bool(b[f"{prefix}correct"])) for a, b in pairs]
        extracted = [(a[f"{prefix}extracted"], b[f"{prefix}extracted"]) for a, b in pairs]
        result[scheme] = {
            "item_accuracy": rate([flag for both in right for flag in both], interval, resamples, seed),
            "pair_accuracy": rate([x and y for x, y in right], interval, resamples, seed),
            "answer_unchanged": rate(
                [normalize(x, scheme) == normalize(y, scheme) for x, y in extracted if x is not None and y is not None],  # type: ignore[arg-type]
                interval,
                resamples,
                seed,
            ),
        }
    return result


def throughput(segments: Sequence[dict]) -> dict[str, Any]:
    """Speed over timing segments ``{"tokens", "prompt_tokens", "seconds", "completions"}``.

    ``tokens_per_s`` counts generated tokens only (prefill time included in the seconds);
    ``prompt_tokens_per_s`` counts the prompts' tokens over the same time, which dominates for
    long stories with short answers.
    """
    tokens = sum(s["tokens"] for s in segments)
    prompt_tokens = sum(s.get("prompt_tokens", 0) for s in segments)
    seconds = sum(s["seconds"] for s in segments)
    return {
        "generated_tokens": tokens,
        "prompt_tokens": prompt_tokens,
        "generation_seconds": round(seconds, 3),
        "completions_timed": sum(s["completions"] for s in segments),
        "tokens_per_s": round(tokens / seconds, 2) if seconds > 0 else None,
        "prompt_tokens_per_s": round(prompt_tokens / seconds, 2) if seconds > 0 else None,
    }


def format_rate(summary: dict[str, Any], digits: int = 1) -> str:
    """``"35.0 % [18.1, 56.7] (n=20)"`` for a :func:`rate` dictionary."""
    if summary["n"] == 0:
        return "n/a (n=0)"
    return (
        f"{100 * summary['value']:.{digits}f} % [{100 * summary['low']:.{digits}f}, {100 * summary['high']:.{digits}f}] (n={summary['n']})"
    )


def no_tom_rules(examples: Sequence[Any], group_by: Iterable[str] = ("order", "question_type"), interval: str = "wilson",
                 resamples: int = 2000, seed: int = 0, nesting: Mapping[str, bool] | None = None) -> dict[str, Any]:
    """The best no-ToM baseline (:func:`tomrl.audit.baseline.no_tom_baseline`: per order the better of
    the best agent-agnostic rule and the agent-blind learner cross-fitted by story, both chosen on these
    very questions, so an upper estimate of a shortcut) beside each accuracy of a benchmark.

    ``overall`` answers each question with its order's best rule; ``by_order`` gives each order's
    own; other groups (``by_question_type`` …) use the per-order answers. Accuracy counts every
    question of the group, those the rules cannot read (not a location question: OpenToM's
    attitude, FANToM) as wrong; ``n_location`` says how many they could read. Keys as
    :func:`summarize_benchmark`'s (``nesting``, as there, adds ``by_nesting``), ``rule`` None where no rule applies.
    """
    from tomrl.audit.heuristics import answers_match, is_location_question
    from tomrl.audit.baseline import no_tom_baseline

    rules = no_tom_baseline(examples, seed=seed)
    combined = rules.get("all")

    def entry(members: Sequence[Any], rule) -> dict[str, Any]:
        result: dict[str, Any] = {"n": len(members), "n_location": sum(1 for e in members if is_location_question(e.question))}
        if rule is None or result["n_location"] == 0:
            return {**result, "rule": None, "accuracy": None, "chance": None}
        hits = [answers_match(rule.answers.get(e.id), e.answer) for e in members]
        return {**result, "rule": rule.rule, "accuracy": rate(hits, interval, resamples, seed), "chance": rule.chance}

    summary: dict[str, Any] = {"overall": entry(examples, combined)}
    for field_name in group_by:
        groups: dict[str, list[Any]] = {}
        for example in examples:
            groups.setdefault(_group_key(getattr(example, field_name, None)), []).append(example)
        by_group = {}
        for key in sorted(groups, key=lambda k: (not k.lstrip("-").isdigit(), int(k) if k.lstrip("-").isdigit() else 0, k)):
            rule = rules.get(key if key != "none" else "None") if field_name == "order" else combined
            by_group[key] = entry(groups[key], rule)
        summary[f"by_{field_name}"] = by_group
    by_nesting = _nesting_groups(examples, nesting, lambda example: example.id)
    if by_nesting:
        summary["by_nesting"] = {key: entry(members, combined) for key, members in by_nesting.items()}
    return summary


def _nesting_groups(items: Sequence[Any], nesting: Mapping[str, bool] | None, id_of: Callable[[Any], str]) -> dict[str, list[Any]]:
    """The items of each ``by_nesting`` group (:data:`NESTING_GROUPS`, in that order), by their ids' flags;
    items without a flag (not a parsed location question of order >= 2) are in neither."""
    groups: dict[str, list[Any]] = {}
    for item in items if nesting else ():
        flag = nesting.get(id_of(item))  # type: ignore[union-attr]
        if flag is not None:
            groups.setdefault(NESTING_GROUPS[flag], []).append(item)
    return {key: groups[key] for key in NESTING_GROUPS.values() if key in groups}


# ----------------------------------------------------------------------------- reading results.json

RESULTS_FILE = "results.json"


def answered_count(entry: Mapping[str, Any]) -> int:
    """Questions answered in one benchmark entry of ``results.json``: its ``n_answered`` (else, in results written
    before that field, its overall n); 0 for anything else."""
    n = entry.get("n_answered") if isinstance(entry, Mapping) else None
    if n is None and isinstance(entry, Mapping) and isinstance(entry.get("overall"), Mapping):
        n = entry["overall"].get("n")
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 0


def results_answered(results: Mapping[str, Any]) -> int:
    """Questions answered over every benchmark of a ``results.json``; 0 is a failed evaluation, not an evaluation
    (tomrl eval no longer writes one, but older folders and copies may hold one)."""
    entries = results.get("benchmarks") if isinstance(results, Mapping) else None
    return sum(answered_count(entry) for entry in entries.values()) if isinstance(entries, Mapping) else 0


def read_results(folder_or_file: str | Path, flag: str = "--table") -> dict[str, Any]:
    """The ``results.json`` of an evaluation folder (or the file itself), checked to be one; one error naming it.

    Readers that count evaluations (``tomrl eval --table``, reports) skip one whose :func:`results_answered` is 0.
    """
    given = Path(folder_or_file)
    path = given / RESULTS_FILE if given.is_dir() else given
    if not path.is_file():
        raise ConfigError(f"{path}: no {RESULTS_FILE} (run tomrl eval first)")
    try:
        results = loads_json(path.read_bytes(), str(path))
    except (BadInputError, UnicodeDecodeError) as error:
        raise ConfigError(f"{flag} {folder_or_file}: {path} is not a tomrl eval {RESULTS_FILE} ({error}); give an eval folder") from None
    if not isinstance(results, dict) or not isinstance(results.get("benchmarks"), dict):
        raise ConfigError(f"{flag} {folder_or_file}: {path} is not a tomrl eval {RESULTS_FILE} (no 'benchmarks'); give an eval folder")
    return results
