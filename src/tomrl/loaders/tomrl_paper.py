"""The data of Paper A (ToM-RL, arXiv 2504.01698) exactly as released, as unified examples.

    tomrl data load tomrl-paper-train --out train.jsonl                  # the 3,200 RL training rows
    tomrl data load tomrl-paper-test-merged --out test.jsonl             # the 8,060-row test/validation file
    tomrl data load tomrl-paper-hitom600 --out hitom600.jsonl            # the paper's five evaluation sets:
    tomrl data load tomrl-paper-hitom4 --out hitom4.jsonl                #   "4th-order ToM" (600)
    tomrl data load tomrl-paper-tomi --out tomi.jsonl                    #   ToMi (5,994)
    tomrl data load tomrl-paper-exploretom --out exploretom.jsonl        #   ExploreToM (1,066, structured)
    tomrl data load tomrl-paper-exploretom-infilled --out infilled.jsonl #   ExploreToM infilled (1,066)

Reads the JSONL conversions in ``shared/data/tomrl_paper`` (see its PROVENANCE.md) or, with
``--path``, the original release files (``ToM_train_HiEx_hint.parquet``,
``ToM_test_HiExTi_hint.parquet``, ``Hi_ToM_cleaned.csv``) or a folder holding either.

Nothing is filtered, re-ordered or relabelled: stories, questions (including the 2,064 ToMi
questions that begin with a space) and answers are the release's. The per-row metadata files
(``meta_train_*.jsonl``, ``meta_test_exploretom_1066.jsonl``) add the orders, deception and
story-length labels the training file lacks; without them the order is read from the question's
form (which agrees with the metadata on every row). ``meta["release_prompt"]`` keeps the full
chat-template prompt the paper trained and evaluated on.

story_id is a hash of the whitespace-normalised story, so a story that occurs in both the
training and the test file has the same story_id in both: that is the release's leakage
(all 600 order-4 test rows, and 1,027 of 1,066 ExploreToM test rows; see ``tomrl data audit``).
"""

from __future__ import annotations

import csv
import functools
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from tomrl.io import BadInputError
from tomrl.loaders.base import (
    DataMissingError,
    DatasetCard,
    Loader,
    data_root,
    field_of,
    hitom_question_type,
    int_of,
    parse_choice_list,
    read_json_rows,
    story_hash,
    story_key,
    story_sentence_count,
    tomi_order,
)
from tomrl.schema import Example

SOURCE = "github.com/bigai-ai/ToM-RL @ 2c92426 (data/cleaned_tom/); metadata from github.com/zhebushipinyin/Tom-RL @ 463b2d5"
LICENSE = "ToM-RL code MIT; no data licence stated — upstream: Hi-ToM Apache-2.0, ToMi CC BY-NC 4.0, ExploreToM CC BY-NC 4.0"
PAPER = "Lu, Zhang et al., ToM-RL: Reinforcement Learning Unlocks Theory of Mind in Small LLMs, arXiv 2504.01698"
LEAK = (
    "Leakage: all 600 order-4 test rows are asked about stories of the training set (orders 0-3 of the same stories were "
    "trained on), and 1,027 of the 1,066 ExploreToM test rows share a story with training; the test file was also the "
    "validation file during training."
)
SUFFIX_MATCH = "The paper's answer reward accepts any prediction that ends with the gold answer ('toolbox' for 'box', hedges like 'X or box')."

_FILES = {
    "train": ("tomrl_train_3200.jsonl", "ToM_train_HiEx_hint.parquet"),
    "test": ("tomrl_test_merged_8060.jsonl", "ToM_test_HiExTi_hint.parquet"),
    "hitom600": ("hitom_600_eval.jsonl", "Hi_ToM_cleaned.csv"),
}
_META_TRAIN_HITOM = "meta_train_hitom_2000.jsonl"
_META_TRAIN_EXPLORE = "meta_train_exploretom_1200.jsonl"
_META_TEST_EXPLORE = "meta_test_exploretom_1066.jsonl"


def _card(title: str, files: tuple[str, ...], counts: dict[str, int], problems: tuple[str, ...], notes: tuple[str, ...] = ()) -> DatasetCard:
    return DatasetCard(
        title=title,
        source=SOURCE,
        license=LICENSE,
        paper=PAPER,
        files=tuple(f"tomrl_paper/{f}" for f in files),
        counts=counts,
        known_problems=problems,
        notes=notes
        + (
            "order: Hi-ToM question_order; ToMi memory/reality 0, first_order 1, second_order 2; ExploreToM nth_order "
            "(-1, the non-ToM questions, → 0). story_id = hash of the whitespace-normalised story (shared across files).",
        ),
    )


# ------------------------------------------------------------------------------ file access


def _locate(kind: str, path: Path | None, card: DatasetCard, name: str) -> Path:
    candidates = _FILES[kind]
    if path is not None:
        if path.is_file():
            return path
        folders = [path, path / "tomrl_paper"]
    else:
        folders = [data_root() / "tomrl_paper"]
    for folder in folders:
        for candidate in candidates:
            if (folder / candidate).is_file():
                return folder / candidate
    raise DataMissingError(
        f"loader '{name}': data not found: none of {', '.join(candidates)} found in {', '.join(map(str, folders))}. "
        "Set TOMRL_DATA to the folder holding tomrl_paper/, or pass --path to the release file "
        "(github.com/bigai-ai/ToM-RL, data/cleaned_tom/)."
    )


def _rows(file: Path) -> list[tuple[str, dict]]:
    if file.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(file)
        except Exception as err:  # pyarrow raises several types for a bad file
            raise BadInputError(f"{file}: not a readable parquet file ({err})") from None
        return [(f"{file}: row {i}", row) for i, row in enumerate(table.to_pylist())]
    if file.suffix == ".csv":
        with open(file, encoding="utf-8", newline="") as handle:
            return [(f"{file}: row {i + 2}", dict(row)) for i, row in enumerate(csv.DictReader(handle))]
    return list(read_json_rows(file))


def _meta_rows(beside: Path, name: str) -> list[tuple[str, dict]] | None:
    for folder in (beside.parent, data_root() / "tomrl_paper"):
        if (folder / name).is_file():
            return list(read_json_rows(folder / name))
    return None


def _prompt_text(row: dict, where: str) -> str | None:
    prompt = row.get("prompt")
    if prompt is None:
        return None
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], dict) and isinstance(prompt[0].get("content"), str):
        return prompt[0]["content"]
    raise BadInputError(f"{where}: field 'prompt': expected a list holding one {{role, content}} message")


# ------------------------------------------------------------------------------ row mapping


def hitom_order_from_question(question: str) -> int:
    """Order of a Hi-ToM question from its form: 'really' is 0, else one per 'think'."""
    q = question.strip()
    if re.search(r"\breally\?$", q) and "think" not in q:
        return 0
    return len(re.findall(r"\bthinks?\b", q))


def exploretom_order_from_question(question: str) -> int:
    """nth_order of an ExploreToM question from its form (-1 for the non-ToM questions)."""
    if re.search(r"\bthinks?\b", question):
        return 2
    if re.search(r"\bwill \w+ search\b", question):
        return 1
    return -1


class _MetaIndex:
    """Metadata rows keyed by (story, question); duplicates are handed out in file order."""

    def __init__(self, rows: list[tuple[str, dict]] | None, story_field: str, question_field: str):
        self.available = rows is not None
        self._rows: dict[tuple[str, str], list[dict]] = defaultdict(list)
        for where, row in rows or ():
            key = (story_key(field_of(row, story_field, where, str)), field_of(row, question_field, where, str).strip())
            self._rows[key].append(row)

    def take(self, story: str, question: str) -> dict | None:
        found = self._rows.get((story_key(story), question.strip()))
        return found.pop(0) if found else None


def _release_example(row: dict, where: str, *, index: int, prefix: str, split: str,
                     hitom_meta: _MetaIndex | None = None, explore_meta: _MetaIndex | None = None) -> Example:
    source = field_of(row, "data_source", where, str)
    story = field_of(row, "story", where, str)
    question = field_of(row, "question", where, str)
    answer = field_of(row, "answer", where, str).strip()
    extra = row.get("extra_info") or {}
    if not isinstance(extra, dict):
        raise BadInputError(f"{where}: field 'extra_info': expected an object")
    meta: dict[str, Any] = {"data_source": source, "release_row": index, "release_prompt": _prompt_text(row, where)}
    choices = None
    deception = None
    story_length: int | None = story_sentence_count(story)
    if source == "hi_tom":
        order = int_of(extra, "question_order", f"{where}: extra_info", optional=True)
        deception = extra.get("deception")
        chapters = int_of(extra, "story_length", f"{where}: extra_info", optional=True)
        found = hitom_meta.take(story, question) if hitom_meta is not None else None
        if found is not None:
            order = int_of(found, "question_order", f"{where} (metadata)")
            deception = found.get("deception")
            chapters = int_of(found, "story_length", f"{where} (metadata)", optional=True)
            meta["sample_id"] = found.get("sample_id")
            if isinstance(found.get("choices"), str):
                choices = parse_choice_list(found["choices"])
        if order is None:
            order = hitom_order_from_question(question)
            meta["order_from"] = "question form"
        story_length = chapters if chapters is not None else story_length
        question_type = hitom_question_type(order)
        family = "tomrl-paper-hitom"
    elif source == "tomi":
        question_type = field_of(extra, "question_type2", f"{where}: extra_info", str)
        try:
            order = tomi_order(question_type)
        except ValueError as err:
            raise BadInputError(f"{where}: field 'extra_info.question_type2': {err}") from None
        meta["story_type"] = extra.get("question_type")
        family = "tomrl-paper-tomi"
    elif source == "explore_tom":
        nth = int_of(extra, "question_order", f"{where}: extra_info", optional=True)
        question_type = extra.get("question_type")
        found = explore_meta.take(story, question) if explore_meta is not None else None
        if found is not None:
            nth = int_of(found, "nth_order", f"{where} (metadata)")
            question_type = found.get("question_type") or question_type
            meta.update(params=found.get("params"), is_interesting=found.get("is_interesting"), story_type=found.get("story_type"))
        if nth is None:
            nth = exploretom_order_from_question(question)
            meta["order_from"] = "question form"
        meta["nth_order"] = nth
        meta["infilled_story"] = extra.get("infilled_story") or (found or {}).get("infilled_story")
        order = max(nth, 0)
        question_type = question_type or "exploretom"
        family = "tomrl-paper-exploretom"
    else:
        raise BadInputError(f"{where}: field 'data_source': expected hi_tom, tomi or explore_tom, got {source!r}")
    return Example(
        id=f"{prefix}-{index}",
        source=family,
        split=split,
        story=story,
        question=question,
        answer=answer,
        order=order,
        question_type=question_type,
        deception=deception if isinstance(deception, bool) else None,
        story_length=story_length,
        story_id=f"tomrl-{story_hash(story)}",
        choices=choices,
        meta=meta,
    )


def _read_train(path: Path | None) -> list[Example]:
    file = _locate("train", path, CARDS["tomrl-paper-train"], "tomrl-paper-train")
    hitom_meta = _MetaIndex(_meta_rows(file, _META_TRAIN_HITOM), "story", "question_old")
    explore_meta = _MetaIndex(_meta_rows(file, _META_TRAIN_EXPLORE), "story_structure", "question")
    return [
        _release_example(row, where, index=i, prefix="tomrl-train", split="train", hitom_meta=hitom_meta, explore_meta=explore_meta)
        for i, (where, row) in enumerate(_rows(file))
    ]


def _read_test(path: Path | None, name: str) -> list[Example]:
    file = _locate("test", path, CARDS[name], name)
    stat = file.stat()
    return list(_read_test_file(str(file.resolve()), stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=2)
def _read_test_file(file_name: str, mtime_ns: int, size: int) -> tuple[Example, ...]:
    # Five evaluation sets are cut from this one 21 MB file: parse it once per process (keyed by
    # path, mtime and size, so an edited file is read again).
    file = Path(file_name)
    explore_meta = _MetaIndex(_meta_rows(file, _META_TEST_EXPLORE), "story_structure", "question")
    return tuple(
        _release_example(row, where, index=i, prefix="tomrl-test", split="test", explore_meta=explore_meta)
        for i, (where, row) in enumerate(_rows(file))
    )


def _bool_cell(value: Any, where: str, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip() in ("True", "False"):
        return value.strip() == "True"
    raise BadInputError(f"{where}: field '{name}': expected True or False, got {value!r}")


def _read_hitom600(path: Path | None) -> list[Example]:
    file = _locate("hitom600", path, CARDS["tomrl-paper-hitom600"], "tomrl-paper-hitom600")
    examples = []
    for where, row in _rows(file):
        order = int_of(row, "question_order", where) if file.suffix != ".csv" else int(float(field_of(row, "question_order", where, str)))
        sample_id = int_of(row, "sample_id", where) if file.suffix != ".csv" else int(float(field_of(row, "sample_id", where, str)))
        length = int_of(row, "story_length", where) if file.suffix != ".csv" else int(float(field_of(row, "story_length", where, str)))
        story = field_of(row, "story", where, str)
        examples.append(
            Example(
                id=f"tomrl-hitom600-{sample_id}",
                source="tomrl-paper-hitom600",
                split="test",
                story=story,
                # The paper evaluates the open-ended question_old; `question` has the 15 options appended.
                question=field_of(row, "question_old", where, str).strip(),
                answer=field_of(row, "answer", where, str).strip(),
                order=order,
                question_type=hitom_question_type(order),
                deception=_bool_cell(row.get("deception"), where, "deception"),
                story_length=length,
                story_id=f"tomrl-{story_hash(story)}",
                choices=parse_choice_list(field_of(row, "choices", where, str)),
                meta={"sample_id": sample_id, "question_with_options": row.get("question"), "answer_old": row.get("answer_old")},
            )
        )
    return examples


def _infilled(examples: list[Example]) -> list[Example]:
    infilled = []
    for e in examples:
        text = e.meta.get("infilled_story")
        if not isinstance(text, str) or not text.strip():
            raise BadInputError(f"tomrl-paper-exploretom-infilled: row {e.id} has no extra_info.infilled_story")
        meta = {k: v for k, v in e.meta.items() if k not in ("infilled_story", "release_prompt")}
        meta["story_structure"] = e.story
        infilled.append(e.replace(id=f"{e.id}-infilled", source="tomrl-paper-exploretom-infilled", story=text, meta=meta))
    return infilled


# ------------------------------------------------------------------------------ the loaders

_TRAIN_NOTES = ("Hi-ToM training rows: 600 stories generated with the Hi-ToM scripts, one line each (joined by spaces).",)

CARDS: dict[str, DatasetCard] = {
    "tomrl-paper-train": _card(
        "ToM-RL training set: 2,000 Hi-ToM (orders 0-3) + 1,200 ExploreToM rows",
        (_FILES["train"][0], _META_TRAIN_HITOM, _META_TRAIN_EXPLORE),
        {"rows": 3200, "tomrl-paper-hitom": 2000, "tomrl-paper-exploretom": 1200, "order 0": 515 + 428, "order 1": 487 + 158,
         "order 2": 500 + 614, "order 3": 498, "stories": 900},
        (LEAK, SUFFIX_MATCH, "No binary (yes/no, knows/does-not-know) ExploreToM questions; one (story, question) pair occurs twice."),
        _TRAIN_NOTES,
    ),
    "tomrl-paper-test-merged": _card(
        "ToM-RL merged test (and validation) file: Hi-ToM 1,000 + ToMi 5,994 + ExploreToM 1,066",
        (_FILES["test"][0], _META_TEST_EXPLORE),
        {"rows": 8060, "tomrl-paper-hitom": 1000, "tomrl-paper-tomi": 5994, "tomrl-paper-exploretom": 1066, "hitom order 4": 600},
        (LEAK, "The 400 Hi-ToM rows of orders 0-3 are in no reported table.", SUFFIX_MATCH),
    ),
    "tomrl-paper-hitom600": _card(
        "ToM-RL's 'Hi-ToM' evaluation set: the original Hi-ToM 600 (CoT-prompt labels), open-ended question_old",
        (_FILES["hitom600"][0],),
        {"rows": 600, "rows per order (0-4)": 120, "stories": 120},
        ("Same questions and labels as `hitom` (prompting=CoTP); 17 labels are disputed by the belief oracle (see the hitom card).",
         "Answering with the object's first stated location after its initial placement gets 15.8/30.8/34.2/43.3/43.3 % on orders 0-4.",
         SUFFIX_MATCH),
        ("question = question_old (open-ended, as the paper evaluated); meta['question_with_options'] keeps the 15-option form.",),
    ),
    "tomrl-paper-hitom4": _card(
        "ToM-RL's '4th-order ToM' set: the merged test's Hi-ToM rows of order 4",
        (_FILES["test"][0],),
        {"rows": 600},
        ("Every one of the 600 stories is also in the training set (asked at orders 0-3 there): not out of distribution.", SUFFIX_MATCH),
    ),
    "tomrl-paper-tomi": _card(
        "ToM-RL's 'ToMi' set: the merged test's 5,994 ToMi rows (Clever_Hans_or_N-ToM regeneration, plain container names)",
        (_FILES["test"][0],),
        {"rows": 5994, "true_belief": 1998, "false_belief": 1998, "second_order_false_belief": 1998},
        ("Not the questions of the official ToMi zip (see the tomi card); second-order labels follow ToMi's noisy construction.",
         "2,064 questions begin with a space; kept so prompts match the paper's.", SUFFIX_MATCH),
    ),
    "tomrl-paper-exploretom": _card(
        "ToM-RL's 'ExploreToM' set: the merged test's 1,066 ExploreToM rows, structured stories",
        (_FILES["test"][0], _META_TEST_EXPLORE),
        {"rows": 1066, "order 0 (nth_order -1)": 178, "order 1": 118, "order 2": 770},
        ("1,027 of the 1,066 rows share a story with the training set.",
         "605 rows ask which room something is in; 516 of them (48 % of the set) are about stories with a single room, "
         "so naming the only room answers them (see `tomrl data audit --by-question-type`).", SUFFIX_MATCH),
    ),
    "tomrl-paper-exploretom-infilled": _card(
        "ToM-RL's 'ExploreToM infilled' set: the same 1,066 questions over the LLM-infilled stories",
        (_FILES["test"][0], _META_TEST_EXPLORE),
        {"rows": 1066},
        ("The infilled stories retell the structured stories that training used (1,027 of 1,066 rows).", SUFFIX_MATCH),
        ("story = extra_info.infilled_story; story_id = the structured story's, so both forms count as one story.",),
    ),
    "tomrl-paper-hitom-pool": _card(
        "All 3,000 Hi-ToM rows generated for ToM-RL (its hi_tom_3000.csv): 600 stories, one question of each order 0-4",
        (_FILES["train"][0], _FILES["test"][0], _META_TRAIN_HITOM),
        {"rows": 3000, "stories": 600, "order 0": 600, "order 1": 600, "order 2": 600, "order 3": 600, "order 4": 600},
        ("The release splits these rows by question, not by story (orders 0-3 to training, order 4 to test): recipes "
         "that use this pool divide it by story instead.",),
        ("The training file's 2,000 Hi-ToM rows followed by the merged test file's 1,000 (ids keep their file's prefix).",),
    ),
}


def _read_hitom_pool(path: Path | None) -> list[Example]:
    train = [e for e in _read_train(path) if e.meta["data_source"] == "hi_tom"]
    test = [e for e in _read_test(path, "tomrl-paper-hitom-pool") if e.meta["data_source"] == "hi_tom"]
    return [e.replace(split="test") for e in train] + test


def _loader(name: str, read) -> Loader:
    return Loader(name, CARDS[name], read, {})


def _subset(data_source: str, orders: tuple[int, ...] | None = None):
    def read(path: Path | None) -> list[Example]:
        examples = [e for e in _read_test(path, _SUBSET_NAMES[data_source, orders]) if e.meta["data_source"] == data_source]
        return [e for e in examples if orders is None or e.order in orders]

    return read


_SUBSET_NAMES = {("hi_tom", (4,)): "tomrl-paper-hitom4", ("tomi", None): "tomrl-paper-tomi", ("explore_tom", None): "tomrl-paper-exploretom"}

LOADERS = [
    _loader("tomrl-paper-train", _read_train),
    _loader("tomrl-paper-test-merged", lambda path: _read_test(path, "tomrl-paper-test-merged")),
    _loader("tomrl-paper-hitom-pool", _read_hitom_pool),
    _loader("tomrl-paper-hitom600", _read_hitom600),
    _loader("tomrl-paper-hitom4", _subset("hi_tom", (4,))),
    _loader("tomrl-paper-tomi", _subset("tomi")),
    _loader("tomrl-paper-exploretom", _subset("explore_tom")),
    _loader("tomrl-paper-exploretom-infilled", lambda path: _infilled(_subset("explore_tom")(path))),
]
