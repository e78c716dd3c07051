"""ExploreToM (Sclar et al., 2025): the released 13,309-question sample of adversarially generated stories.

    tomrl data load exploretom --out exploretom.jsonl                           # structured stories
    tomrl data load exploretom story_form=infilled --out exploretom_infilled.jsonl
    tomrl data load exploretom exclude_binary=true --out exploretom_open.jsonl # no yes/no, no knows/does-not-know
    tomrl data load exploretom --path ~/ExploreToM-data-sample.csv --out exploretom.jsonl

Reads the JSONL conversion in ``shared/data/exploretom`` or the official
``ExploreToM-data-sample.csv`` (Hugging Face ``facebook/ExploreToM``, 18 columns).

Marks, in ``meta``: ``is_binary_yes_no`` (gold is yes/no), ``is_knowledge_q`` (property
``<knowledge>``), ``binary`` (either yes/no or "knows about it" / "does not know about it"),
``requires_tom`` (``nth_order`` ≥ 1). Order: ``nth_order`` 1 and 2 are kept; the non-ToM
questions (``nth_order == -1``: memory, memory-before-event, ground truth) get order 0, like
ToMi's memory and reality questions, and keep ``meta["nth_order"] == -1``.
"""

from __future__ import annotations

import ast
import csv
from pathlib import Path

from tomrl.io import BadInputError
from tomrl.loaders.base import DatasetCard, Loader, LoaderOption, field_of, find_file, int_of, read_json_rows, story_hash, story_sentence_count
from tomrl.schema import Example

CARD = DatasetCard(
    title="ExploreToM: program-guided adversarial ToM stories (released sample)",
    source="HF facebook/ExploreToM ExploreToM-data-sample.csv; copy used here: github.com/bigai-ai/ToM-RL @ 2c92426 data/cleaned_tom/raw/explore_tom.xlsx",
    license="CC BY-NC 4.0",
    paper="Sclar et al., Explore Theory of Mind: program-guided adversarial data generation for theory of mind reasoning, ICLR 2025",
    files=("exploretom/exploretom_sample.jsonl", "exploretom/ExploreToM-data-sample.csv"),
    counts={
        "rows": 13309,
        "stories": 619,
        "binary yes/no rows": 3473,
        "knowledge rows": 6804,
        "rows that are neither yes/no nor knowledge": 5178,
        "non-ToM rows (nth_order -1)": 847,
    },
    known_problems=(
        "The copy here is ToM-RL's xlsx of the HF sample; it was not byte-compared with the HF CSV (unreachable).",
        "15 (story_structure, question) pairs occur twice; two story texts carry two global_idx values each "
        "(621 ids, 619 stories): story_id is a hash of the structured story text, meta['global_idx'] keeps the id.",
        "A quarter of the questions are binary yes/no and half are knowledge questions (knows / does not know): "
        "answer priors alone go far on them; exclude_binary=true keeps the open questions (as ToM-RL did).",
        "ToM-RL's ExploreToM test set shares a story with its training set in 1,027 of 1,066 rows (see tomrl-paper-exploretom).",
    ),
    notes=(
        "order: nth_order 1/2 kept, -1 (memory, memory_before_event, ground_truth) → 0; question_type = the question property "
        "(e.g. container_location-True, room_location-True, memory-container_location, knowledge-True, state_update).",
        "story = story_structure (story_form=structured) or infilled_story (story_form=infilled); story_id = a hash of the "
        "structured story, shared by both forms.",
    ),
)

OPTIONS = {
    "story_form": LoaderOption("structured", "which story text: structured (programmatic sentences) or infilled (LLM-rewritten narrative)", ("structured", "infilled")),
    "exclude_binary": LoaderOption(False, "drop yes/no and knows/does-not-know questions"),
}

_KNOWLEDGE_ANSWERS = {"knows about it", "does not know about it"}


def question_type_of(prop: str) -> str:
    if prop.startswith("<state_update>"):
        return "state_update"
    return prop.replace("<knowledge>", "knowledge")


def _parse_params(text: str, where: str) -> tuple:
    try:
        value = ast.literal_eval(text)  # a Python tuple repr: literal_eval evaluates no code
    except (ValueError, SyntaxError):
        raise BadInputError(f"{where}: field 'qprop=params': not a tuple literal: {text[:80]!r}") from None
    if not isinstance(value, tuple) or len(value) != 3:
        raise BadInputError(f"{where}: field 'qprop=params': expected (entities, thing, property), got {text[:80]!r}")
    return value


def _bool_of(row: dict, name: str, where: str) -> bool | None:
    value = row.get(name)
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip() in ("True", "False", "true", "false"):
        return value.strip().lower() == "true"
    raise BadInputError(f"{where}: field '{name}': expected True or False, got {value!r}")


def _example(row: dict, where: str, index: int, story_form: str) -> Example:
    structured = field_of(row, "story_structure", where, str)
    story = structured if story_form == "structured" else field_of(row, "infilled_story", where, str)
    question = field_of(row, "question", where, str)
    answer = str(field_of(row, "expected_answer", where, (str, int, float))).strip()
    params_text = field_of(row, "qprop=params", where, str)
    entities, thing, prop = _parse_params(params_text, where)
    nth_order = int_of(row, "qprop=nth_order", where)
    if nth_order not in (-1, 1, 2):
        raise BadInputError(f"{where}: field 'qprop=nth_order': expected -1, 1 or 2, got {nth_order}")
    global_idx = int_of(row, "sprop=global_idx", where)
    row_index = int_of(row, "row_index", where, optional=True)
    row_index = index if row_index is None else row_index
    is_yes_no = answer.lower() in ("yes", "no")
    is_knowledge = str(prop).startswith("<knowledge>")
    meta = {
        "nth_order": nth_order,
        "property": prop,
        "entities": list(entities) if isinstance(entities, (list, tuple)) else entities,
        "thing": thing,
        "is_binary_yes_no": is_yes_no,
        "is_knowledge_q": is_knowledge,
        "binary": is_yes_no or answer.lower() in _KNOWLEDGE_ANSWERS,
        "requires_tom": nth_order >= 1,
        "non_unique_mental_state": _bool_of(row, "qprop=non_unique_mental_state", where),
        "story_type": row.get("param=story_type"),
        "global_idx": global_idx,
        "row_index": row_index,
        "story_form": story_form,
    }
    if story_form == "infilled":
        meta["story_structure"] = structured
    return Example(
        id=f"exploretom-{row_index}" if story_form == "structured" else f"exploretom-infilled-{row_index}",
        source="exploretom",
        split="test",
        story=story,
        question=question.strip(),
        answer=answer,
        order=max(nth_order, 0),
        question_type=question_type_of(str(prop)),
        deception=None,
        story_length=story_sentence_count(structured),
        story_id=f"exploretom-{story_hash(structured)}",
        choices=None,
        meta=meta,
    )


def _csv_rows(file: Path):
    try:
        with open(file, encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            for index, row in enumerate(reader):
                # pandas writes NaN as an empty cell; the loader treats it as missing.
                yield f"{file}: row {index + 2}", {k: (v if v != "" else None) for k, v in row.items() if k}
    except UnicodeDecodeError as err:
        raise BadInputError(f"{file}: not UTF-8 text ({err.reason})") from None


def read(path: Path | None, story_form: str, exclude_binary: bool) -> list[Example]:
    file = find_file("exploretom", CARD, path, ["exploretom_sample.jsonl", "ExploreToM-data-sample.csv", "exploretom/exploretom_sample.jsonl"])
    rows = _csv_rows(file) if file.suffix == ".csv" else read_json_rows(file)
    examples = []
    for index, (where, row) in enumerate(rows):
        if file.suffix == ".csv":
            row = {**row, "qprop=nth_order": _csv_int(row, "qprop=nth_order", where), "sprop=global_idx": _csv_int(row, "sprop=global_idx", where)}
        examples.append(_example(row, where, index, story_form))
    if not examples:
        raise BadInputError(f"{file}: no rows")
    if exclude_binary:
        examples = [e for e in examples if not e.meta["binary"]]
    return examples


def _csv_int(row: dict, name: str, where: str) -> int:
    value = row.get(name)
    try:
        return int(float(value))
    except (TypeError, ValueError):
        raise BadInputError(f"{where}: field '{name}': expected an integer, got {value!r}") from None


LOADERS = [Loader("exploretom", CARD, read, OPTIONS)]
