"""FANToM (Kim et al., 2023): ToM questions about multi-party conversations with information asymmetry.

    tomrl data load fantom --path ~/fantom/fantom_v1.json --out fantom.jsonl
    tomrl data load fantom context=full --out fantom_full.jsonl

No copy of the data can be obtained on this machine: fetch
https://storage.googleapis.com/ai2-mosaic-public/projects/fantom/fantom.tar.gz on a machine with
internet, check its sha256 (``1d08dfa0ea474c7f83b9bc7e3a7b466eab25194043489dd618b4c5223e1253a4``),
unpack it and put ``fantom/fantom_v1.json`` in ``$TOMRL_DATA/fantom/`` (or pass ``--path``).

Reads ``fantom_v1.json`` as the official ``task/dataset_loader.py`` does (``pandas.read_json``:
a list of records, a ``{"data": [...]}`` object, a column-oriented object, or JSON lines), one row
per question set, and flattens it the way ``eval_fantom.py`` does:

=====================================  =================================================  =======
question_type                          question                                           order
=====================================  =================================================  =======
``fact``                               factQA.question                                    0
``belief:{inaccessible,accessible}``   beliefQAs[i].question (free answer)                1 or 2
``belief:…:multiple-choice``           the same, with choices [correct, wrong] shuffled   1 or 2
``answerability:list``                 "Target: <fact question>" + question               1
``answerability:binary``               "Target: <fact question>" + question + yes/no      1
``info_accessibility:list``            "Information: <fact Q> <fact A>" + question        1
``info_accessibility:binary``          the same + yes/no                                  1
=====================================  =================================================  =======

List answers are the aware characters joined by ", " ("none" for nobody; ``meta["answer_list"]`` /
``meta["wrong_answer_list"]`` keep the aware and unaware lists, FANToM's ``correct_answer`` and
``wrong_answer``). ``paper_eval`` scores them with the official ``evaluate_list_q``, which needs the
unaware list (``check_answer(..., unaware=example.meta["wrong_answer_list"])``); ``strict`` compares
sets of names (:mod:`tomrl.rewards.answer`). Binary questions answered ``no:long`` (the
information appears only in the full conversation) are dropped with ``context=short``, as the
official evaluation drops them. The README asks that FANToM be used for evaluation only; Paper B
trained on its binary belief questions anyway, so recipes allow it (the card records the request).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from tomrl.io import BadInputError
from tomrl.loaders.base import DatasetCard, Loader, LoaderOption, field_of, find_file, read_json_file, read_json_rows, story_sentence_count
from tomrl.schema import Example

HOW_TO_OBTAIN = (
    "FANToM cannot be downloaded here: on a machine with internet fetch "
    "https://storage.googleapis.com/ai2-mosaic-public/projects/fantom/fantom.tar.gz, check sha256 "
    "1d08dfa0ea474c7f83b9bc7e3a7b466eab25194043489dd618b4c5223e1253a4, unpack it, and copy fantom/fantom_v1.json "
    "to $TOMRL_DATA/fantom/fantom_v1.json (or pass --path /path/to/fantom_v1.json)."
)

CARD = DatasetCard(
    title="FANToM: theory of mind in information-asymmetric conversations",
    source="github.com/skywalker023/fantom @ ebd35eb (code); data: storage.googleapis.com/ai2-mosaic-public/projects/fantom/fantom.tar.gz (v1.0)",
    license="data: see the FANToM README (evaluation use requested); code: MIT",
    paper="Kim et al., FANToM: A Benchmark for Stress-testing Machine Theory of Mind in Interactions, EMNLP 2023",
    files=("fantom/fantom_v1.json", "fantom/fantom_v1.jsonl"),
    counts={},  # no copy was available to count; the loader is tested on a file the test builds
    known_problems=(
        "No copy of the data is available on this machine; the counts were not verified here.",
        "The README asks that the samples be used for evaluation only; Paper B trained on its binary belief questions.",
        "Belief questions are scored in the official evaluation by embedding similarity (free form) or by letter (multiple "
        "choice); here the multiple-choice form carries the two options as choices and the correct text as answer.",
    ),
    how_to_obtain=HOW_TO_OBTAIN,
    notes=(
        "story = short_context (context=short, default) or full_context; story_id = the conversation (first field of set_id).",
        "Binary questions' 'no:long' answers become 'no' with meta['no_long'] = true; they are dropped with context=short.",
        "List questions: answer = the aware characters joined by ', ' ('none' for nobody); meta['answer_list'] and "
        "meta['wrong_answer_list'] keep the aware and unaware names. Scoring (docs/rewards.md): paper_eval applies the "
        "official evaluate_list_q (every aware name a case-insensitive substring of the answer, no unaware name: pass "
        "meta['wrong_answer_list'] as unaware=); strict compares sets of names, which is stricter.",
    ),
)

OPTIONS = {"context": LoaderOption("short", "conversation given as the story: short (the relevant part) or full", ("short", "full"))}


def _records(file: Path) -> list[tuple[str, dict]]:
    """Rows of fantom_v1.json in any layout ``pandas.read_json`` accepts for it."""
    if file.suffix == ".jsonl":
        return list(read_json_rows(file))
    data = read_json_file(file)
    if isinstance(data, dict) and isinstance(data.get("set_id"), dict):
        # pandas' default "columns" orientation: {column: {row_index: value}}
        index = list(data["set_id"].keys())
        data = [{column: values.get(i) for column, values in data.items() if isinstance(values, dict)} for i in index]
    return list(read_json_rows(file, data))


def _order_of_tom_type(tom_type: str, where: str) -> int:
    if tom_type.startswith("first-order"):
        return 1
    if tom_type.startswith("second-order"):
        return 2
    raise BadInputError(f"{where}: field 'tom_type': expected 'first-order' or 'second-order:…', got {tom_type!r}")


def _shuffled(options: list[str], key: str) -> list[str]:
    # A fixed order per question (the official script draws it from a seeded global RNG).
    return options if hashlib.sha1(key.encode()).digest()[0] % 2 == 0 else list(reversed(options))


def _names(value: Any, where: str, name: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadInputError(f"{where}: field '{name}': expected a list of names")
    return value


def _set_examples(row: dict, where: str, context: str) -> list[Example]:
    set_id = str(field_of(row, "set_id", where, str))
    conversation = set_id.split("-")[0]
    story = field_of(row, f"{context}_context", where, str).strip()
    examples: list[Example] = []

    def add(kind: str, k: int, question: str, answer: str, question_type: str, order: int | None, *, choices=None, **meta):
        examples.append(
            Example(
                id=f"fantom-{set_id}-{kind}-{k}",
                source="fantom",
                split="test",
                story=story,
                question=question,
                answer=answer,
                order=order,
                question_type=question_type,
                deception=None,
                story_length=story_sentence_count(story),
                story_id=f"fantom-{conversation}",
                choices=choices,
                meta={"set_id": set_id, "context": context, "missed_info": row.get("missed_info"), "joining_speaker": row.get("joining_speaker"), **meta},
            )
        )

    fact = field_of(row, "factQA", where, dict)
    fact_q = field_of(fact, "question", f"{where}: factQA", str).strip()
    fact_a = str(field_of(fact, "correct_answer", f"{where}: factQA", str)).strip()
    add("fact", 0, fact_q, fact_a, "fact", 0)

    for k, qa in enumerate(field_of(row, "beliefQAs", where, list)):
        at = f"{where}: beliefQAs[{k}]"
        if not isinstance(qa, dict):
            raise BadInputError(f"{at}: expected an object")
        kind = field_of(qa, "question_type", at, str)  # "tom:belief:inaccessible" | "tom:belief:accessible"
        if not kind.startswith("tom:belief:"):
            raise BadInputError(f"{at}: field 'question_type': expected 'tom:belief:…', got {kind!r}")
        question_type = kind.removeprefix("tom:")
        order = _order_of_tom_type(field_of(qa, "tom_type", at, str), at)
        question = field_of(qa, "question", at, str).strip()
        correct = field_of(qa, "correct_answer", at, str).strip()
        wrong = field_of(qa, "wrong_answer", at, str).strip()
        extra = {"wrong_answer": wrong, "tom_type": qa.get("tom_type"), "missed_info_accessibility": qa.get("missed_info_accessibility")}
        add("belief", k, question, correct, question_type, order, **extra)
        add("belief-mc", k, question, correct, f"{question_type}:multiple-choice", order,
            choices=_shuffled([correct, wrong], f"{set_id}-{k}"), **extra)

    for list_field, label, prefix in (
        ("answerabilityQA_list", "answerability", f"Target: {fact_q}"),
        ("infoAccessibilityQA_list", "info_accessibility", f"Information: {fact_q} {fact_a}"),
    ):
        qa = row.get(list_field)
        if qa is None:
            continue
        at = f"{where}: {list_field}"
        if not isinstance(qa, dict):
            raise BadInputError(f"{at}: expected an object")
        correct = _names(qa.get("correct_answer"), at, "correct_answer")
        wrong = _names(qa.get("wrong_answer", []), at, "wrong_answer")
        question = field_of(qa, "question", at, str).strip()
        add(f"{label}-list", 0, f"{prefix}\n{question}", ", ".join(correct) if correct else "none", f"{label}:list", 1,
            answer_list=correct, wrong_answer_list=wrong, missed_info_accessibility=qa.get("missed_info_accessibility"))

    for binary_field, label, prefix in (
        ("answerabilityQAs_binary", "answerability", f"Target: {fact_q}"),
        ("infoAccessibilityQAs_binary", "info_accessibility", f"Information: {fact_q} {fact_a}"),
    ):
        for k, qa in enumerate(row.get(binary_field) or []):
            at = f"{where}: {binary_field}[{k}]"
            if not isinstance(qa, dict):
                raise BadInputError(f"{at}: expected an object")
            answer = field_of(qa, "correct_answer", at, str).strip()
            if answer not in ("yes", "no", "no:long"):
                raise BadInputError(f"{at}: field 'correct_answer': expected yes, no or no:long, got {answer!r}")
            if answer == "no:long" and context == "short":
                continue  # the short context does not contain what the question is about
            question = field_of(qa, "question", at, str).strip()
            add(f"{label}-binary", k, f"{prefix}\n{question} Answer yes or no.", answer.split(":")[0], f"{label}:binary", 1,
                no_long=answer == "no:long", missed_info_accessibility=qa.get("missed_info_accessibility"))
    return examples


def read(path: Path | None, context: str) -> list[Example]:
    file = find_file("fantom", CARD, path, ["fantom_v1.json", "fantom_v1.jsonl", "fantom/fantom_v1.json", "fantom/fantom_v1.jsonl"])
    examples = []
    for where, row in _records(file):
        examples.extend(_set_examples(row, where, context))
    if not examples:
        raise BadInputError(f"{file}: no question sets")
    return examples


LOADERS = [Loader("fantom", CARD, read, OPTIONS)]
