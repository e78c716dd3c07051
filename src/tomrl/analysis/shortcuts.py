"""Does a model answer like a no-ToM shortcut? Its answers against the audit's heuristics.

    rows = compare_with_heuristics(records, matches=answers_match)
    for row in rows:
        print(row.heuristic, row.agreement_when_wrong.format())

For every question the audit's heuristics (:mod:`tomrl.audit.heuristics`: last container
mentioned, first container, true final location, …) each give an answer that needs no belief
tracking. Where a heuristic is *right* a model cannot be told apart from it; where it is *wrong*
a model that tracks beliefs should almost never give that answer. So the telling number is the
**agreement when the heuristic is wrong**: of the questions the heuristic gets wrong, the share
the model answers exactly as the heuristic does (with a 95 % Wilson interval). Comparing it
before and after training shows whether RL taught a shortcut; the "random container" heuristic
gives the agreement expected by chance.

"Same answer" uses the project's answer matcher (:func:`tomrl.rewards.answer.answers_match`,
strict: equal after normalisation, no suffix or substring matching), passed in as
``matches(prediction, reference)``. The model's answer is its last ``<answer>`` tag, read even
when the completion is malformed (a format failure still says which container the model chose).

:func:`records_for_evaluation` builds the records of a ``tomrl eval`` folder: it reloads each
benchmark's questions with the evaluation's own loader and settings (from ``results.json``),
joins them to ``samples.jsonl`` by id, and asks every heuristic of
:data:`tomrl.audit.heuristics.HEURISTICS` for its answer.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from tomrl.analysis.significance import Interval, difference_interval, from_counts
from tomrl.stats import Accuracy


@dataclass(frozen=True)
class ShortcutRecord:
    """One question: the model's extracted answer, the gold answer, and each heuristic's answer."""

    model_answer: str | None  # None when the model gave no answer
    gold: str
    heuristic_answers: Mapping[str, str | None]  # heuristic → its answer (None = it has none here)
    order: int | None = None
    key: str = ""  # question id, to pair two models' answers on the same questions
    group: str = ""  # the benchmark it belongs to (heuristics are compared within one benchmark)


@dataclass(frozen=True)
class ShortcutRow:
    heuristic: str
    questions: int  # questions where the heuristic gave an answer
    heuristic_accuracy: Accuracy  # the heuristic's own accuracy on them
    agreement_when_wrong: Accuracy  # of the questions it gets wrong, share the model answers the same
    model_accuracy_when_right: Accuracy  # the model's accuracy where the heuristic is right
    model_accuracy_when_wrong: Accuracy  # … and where it is wrong

    def to_dict(self) -> dict:
        return {
            "heuristic": self.heuristic, "questions": self.questions,
            "heuristic_accuracy": self.heuristic_accuracy.to_dict(),
            "agreement_when_wrong": self.agreement_when_wrong.to_dict(),
            "model_accuracy_when_right": self.model_accuracy_when_right.to_dict(),
            "model_accuracy_when_wrong": self.model_accuracy_when_wrong.to_dict(),
        }


Matcher = Callable[[str, str], bool]


def compare_with_heuristics(records: Sequence[ShortcutRecord], matches: Matcher) -> list[ShortcutRow]:
    """One row per heuristic (in first-seen order) over ``records``."""
    names: dict[str, None] = {}
    for record in records:
        for name in record.heuristic_answers:
            names.setdefault(name, None)
    rows = []
    for name in names:
        heuristic_right, agree_wrong, model_right_when_right, model_right_when_wrong = [], [], [], []
        for record in records:
            answer = record.heuristic_answers.get(name)
            if answer is None:
                continue
            model_right = record.model_answer is not None and matches(record.model_answer, record.gold)
            if matches(answer, record.gold):
                heuristic_right.append(True)
                model_right_when_right.append(model_right)
            else:
                heuristic_right.append(False)
                agree_wrong.append(record.model_answer is not None and matches(record.model_answer, answer))
                model_right_when_wrong.append(model_right)
        rows.append(ShortcutRow(
            heuristic=name,
            questions=len(heuristic_right),
            heuristic_accuracy=_rate(heuristic_right),
            agreement_when_wrong=_rate(agree_wrong),
            model_accuracy_when_right=_rate(model_right_when_right),
            model_accuracy_when_wrong=_rate(model_right_when_wrong),
        ))
    return rows


def _rate(flags: Sequence[bool]) -> Accuracy:
    return from_counts(sum(1 for f in flags if f), len(flags))


@dataclass(frozen=True)
class ShortcutShift:
    """How a heuristic's agreement-when-wrong changed from one model to another (same questions)."""

    heuristic: str
    before: Accuracy
    after: Accuracy
    change: Interval | None  # after − before; None when either has no wrong-heuristic questions


def shortcut_shift(before: Sequence[ShortcutRow], after: Sequence[ShortcutRow], level: float = 0.95) -> list[ShortcutShift]:
    """Pair two models' rows by heuristic and give the change in agreement when the heuristic is wrong."""
    after_by_name = {row.heuristic: row for row in after}
    shifts = []
    for row in before:
        other = after_by_name.get(row.heuristic)
        if other is None:
            continue
        a, b = row.agreement_when_wrong, other.agreement_when_wrong
        change = difference_interval(b, a, level) if a.n > 0 and b.n > 0 else None
        shifts.append(ShortcutShift(row.heuristic, a, b, change))
    return shifts


def paired_records(before: Sequence[ShortcutRecord], after: Sequence[ShortcutRecord]) -> tuple[list, list]:
    """Only the questions both models answered (matched by ``key``), in the same order."""
    after_by_key = {r.key: r for r in after if r.key}
    keys = [r.key for r in before if r.key in after_by_key]
    before_by_key = {r.key: r for r in before}
    return [before_by_key[k] for k in keys], [after_by_key[k] for k in keys]


def answers_match(prediction: str, reference: str) -> bool:
    """The shared strict matcher (equal after normalisation)."""
    from tomrl.rewards.answer import answers_match as shared_match

    return shared_match(prediction, reference, "strict")


@functools.lru_cache(maxsize=32)
def _benchmark_questions(name: str, data_paths_json: str, heldout_n: int, heldout_seed: int) -> tuple:
    """A benchmark's questions as ``tomrl eval`` loads them (cached: before and after share them)."""
    from tomrl.evaluation.benchmarks import BENCHMARKS, load_examples

    return tuple(load_examples(BENCHMARKS[name], json.loads(data_paths_json), heldout_n, heldout_seed))


def records_for_evaluation(evaluation) -> tuple[list[ShortcutRecord], list[str]]:
    """Shortcut records for every answered question of an evaluation folder, and notes on what
    had to be left out (a benchmark whose data or questions can no longer be loaded).

    ``evaluation``: a :class:`tomrl.analysis.runs.Evaluation`.
    """
    from tomrl.audit.heuristics import HEURISTICS
    from tomrl.evaluation.benchmarks import BENCHMARKS, DataMissing
    from tomrl.io import iter_jsonl

    if evaluation.samples_path is None:
        return [], [f"{evaluation.path}: no {evaluation.path / 'samples.jsonl'}, so its answers cannot be compared"]
    rows_by_benchmark: dict[str, list[dict]] = {}
    for _, row in iter_jsonl(evaluation.samples_path, allow_torn_tail=True):
        rows_by_benchmark.setdefault(str(row.get("benchmark")), []).append(row)
    config = evaluation.info.get("config") or {}
    records: list[ShortcutRecord] = []
    notes: list[str] = []
    for name, rows in rows_by_benchmark.items():
        benchmark = BENCHMARKS.get(name)
        if benchmark is None or name not in evaluation.benchmarks:
            continue
        try:
            examples = _benchmark_questions(name, json.dumps(config.get("data_paths") or {}, sort_keys=True),
                                            config.get("heldout_n", 0), config.get("heldout_seed", 0))
        except DataMissing as missing:
            notes.append(f"{name} ({evaluation.path.name}): left out, its questions cannot be reloaded ({missing})")
            continue
        by_id = {example.id: example for example in examples}
        missing_ids = [row.get("id") for row in rows if row.get("id") not in by_id]
        if missing_ids:
            notes.append(f"{name} ({evaluation.path.name}): left out, {len(missing_ids)} of {len(rows)} answered question "
                         f"ids (e.g. {missing_ids[0]!r}) are not in the benchmark as its loader reads it now")
            continue
        for row in rows:
            example = by_id[row["id"]]
            answers = {heuristic: function(example) for heuristic, function in HEURISTICS.items()}
            if all(answer is None for answer in answers.values()):
                continue  # not a location question: no heuristic answers it
            model_answer = row.get("paper_extracted") or row.get("extracted")
            records.append(ShortcutRecord(model_answer, example.answer, answers, example.order, example.id, name))
    return records, notes
