"""Hi-ToM (He et al., 2023): 1,200 higher-order ToM questions (orders 0-4) over 120 stories.

    tomrl data load hitom --out hitom.jsonl                       # 600 CoT-prompt rows (default)
    tomrl data load hitom prompting=VP --out hitom_vp.jsonl       # the vanilla-prompt copies
    tomrl data load hitom drop_disputed=true --out hitom.jsonl    # without the 17 rows the oracle disputes
    tomrl data load hitom --path ~/Hi-ToM_dataset/Hi-ToM_data.json --out hitom.jsonl

Reads any of: the JSONL conversion in ``shared/data/hitom`` (``hitom_data.jsonl``), the official
``Hi-ToM_data.json`` (``{"data": [...]}``), or the official ``Hi-ToM_data/`` folder of
``{Tell,No_Tell}/{CoT,MC}/length_L/sample_n/order_k.txt`` files.

The two prompting styles carry the same 600 questions but different gold labels in 138 pairs;
the CoT-prompt (``CoTP``) labels are the ones the belief oracle re-derives (583 of 600) and the
ones ToM-RL's ``Hi_ToM_cleaned.csv`` uses, so they are the default. Every row gets
``meta["oracle_answer"]`` and ``meta["oracle_disputes"]`` from :mod:`tomrl.world` (see
:mod:`tomrl.loaders.oracle_check`).
"""

from __future__ import annotations

import re
from pathlib import Path

from tomrl.io import BadInputError
from tomrl.loaders.base import (
    DatasetCard,
    Loader,
    LoaderOption,
    field_of,
    find_file,
    hitom_question_type,
    int_of,
    parse_choice_list,
    read_json_rows,
    story_hash,
)
from tomrl.loaders.oracle_check import flag_disputes
from tomrl.schema import Example

# The vanilla-prompt rows carry their instruction inside the story; it is not part of the story.
_INSTRUCTION = re.compile(r"^Read the following story.*$", re.MULTILINE)
_LINE_NUMBER = re.compile(r"^\s*\d+\s+")

CARD = DatasetCard(
    title="Hi-ToM: higher-order Theory-of-Mind questions (orders 0-4)",
    source="github.com/ying-hui-he/Hi-ToM_dataset @ 56dda76 (Hi-ToM_data.json); also HF Hi-ToM/Hi-ToM_Dataset",
    license="Apache-2.0",
    paper="He et al., Hi-ToM: A Benchmark for Evaluating Higher-Order Theory of Mind Reasoning in LLMs, Findings of EMNLP 2023 (arXiv:2310.16755)",
    files=("hitom/hitom_data.jsonl", "hitom/Hi-ToM_data.json"),
    counts={"rows": 600, "stories": 120, "rows per order (0-4)": 120, "rows with prompting=both": 1200, "oracle-disputed CoTP rows": 17},
    known_problems=(
        "The vanilla-prompt (VP) and CoT-prompt (CoTP) copies of the same question carry different gold answers in 138 of 600 pairs; "
        "the belief oracle agrees with 583/600 CoTP labels and 470/600 VP labels. CoTP labels are the default.",
        "17 CoTP rows are disputed by the oracle (sample ids 241, 242, 261, 262, 281, 285, 292, 296, 742, 758, 762, 774, 778, 782, 794, 857, 881); "
        "several gold answers name a container from another room. Flagged in meta['oracle_disputes']; drop them with drop_disputed=true.",
        "Answering with the object's first stated location after its initial placement, without tracking any belief, is right on "
        "15.8/30.8/34.2/43.3/43.3 % of orders 0-4: it gets better as the order rises (see `tomrl data audit`).",
        "Six stories end with a stray '***' line in the source; it is dropped.",
    ),
    notes=(
        "order = question_order (0-4); question_type = reality/first_order/…/fourth_order; deception = Tell folder; "
        "story_length = chapters (1-3); choices = the 15 containers of the story (the source's MC options).",
        "story = the numbered lines without their numbers, one sentence per line (identical to ToM-RL's Hi-ToM 600 stories).",
        "story_id is shared by the VP and CoTP copies of a story and by its five questions.",
    ),
)

OPTIONS = {
    "prompting": LoaderOption("CoTP", "which copy's labels: CoTP (chain-of-thought prompt, default), VP (vanilla prompt) or both", ("CoTP", "VP", "both")),
    "drop_disputed": LoaderOption(False, "drop the rows whose label the belief oracle disputes"),
    "oracle": LoaderOption(True, "compute meta['oracle_answer'] / meta['oracle_disputes'] with tomrl.world"),
}


def clean_story(raw: str) -> str:
    """Story lines without the instruction line, line numbers, blank lines and '***'."""
    raw = _INSTRUCTION.sub("", raw)
    lines = []
    for line in raw.splitlines():
        line = _LINE_NUMBER.sub("", line).strip()
        if line and not set(line) <= {"*"}:
            lines.append(line)
    return "\n".join(lines)


def _example(row: dict, where: str) -> Example:
    prompting = field_of(row, "prompting_type", where, str)
    if prompting not in ("CoTP", "VP"):
        raise BadInputError(f"{where}: field 'prompting_type': expected 'CoTP' or 'VP', got {prompting!r}")
    deception = field_of(row, "deception", where, bool)
    length = int_of(row, "story_length", where)
    order = int_of(row, "question_order", where)
    if not 0 <= order <= 4:
        raise BadInputError(f"{where}: field 'question_order': expected 0-4, got {order}")
    sample_id = int_of(row, "sample_id", where)
    story = clean_story(field_of(row, "story", where, str))
    if not story:
        raise BadInputError(f"{where}: field 'story': no story sentences")
    choices_text = field_of(row, "choices", where, str)
    choices = parse_choice_list(choices_text)
    answer = field_of(row, "answer", where, str).strip()
    meta = {"prompting_type": prompting, "sample_id": sample_id}
    for extra in ("sample_index", "story_key", "source_txt"):
        if row.get(extra) is not None:
            meta[extra] = row[extra]
    return Example(
        id=f"hitom-{prompting.lower()}-{sample_id}",
        source="hitom",
        split="test",
        story=story,
        question=field_of(row, "question", where, str).strip(),
        answer=answer,
        order=order,
        question_type=hitom_question_type(order),
        deception=deception,
        story_length=length,
        story_id=f"hitom-{story_hash(story)}",
        choices=choices,
        meta=meta,
    )


_TXT_PATH = re.compile(r"(?P<tell>No_Tell|Tell)/(?P<style>CoT|MC)/length_(?P<length>\d)/sample_(?P<sample>\d+)/order_(?P<order>\d)\.txt$")


def _rows_from_txt_folder(folder: Path) -> list[tuple[str, dict]]:
    """Rows of the official ``Hi-ToM_data/`` folder, with the JSON's fields (sample_id included)."""
    rows = []
    for path in sorted(folder.rglob("order_*.txt")):
        match = _TXT_PATH.search(path.as_posix())
        if match is None:
            continue
        text = path.read_text(encoding="utf-8")
        where = str(path)
        parts = re.match(r"(?s).*?Story:\n(?P<story>.*?)\nQuestion: (?P<question>.*?)\nAnswer: (?P<answer>.*?)\nChoices: (?P<choices>[^\n]*)", text)
        if parts is None:
            raise BadInputError(f"{where}: expected 'Story:', 'Question:', 'Answer:' and 'Choices:' sections")
        tell, style = match["tell"] == "Tell", match["style"]
        length, sample, order = int(match["length"]), int(match["sample"]), int(match["order"])
        # The running index of Hi-ToM_data.json: Tell, style, length, order, sample.
        sample_id = tell * 600 + (style == "MC") * 300 + (length - 1) * 100 + order * 20 + (sample - 1)
        rows.append(
            (
                where,
                {
                    "prompting_type": "CoTP" if style == "CoT" else "VP",
                    "deception": tell,
                    "story_length": length,
                    "question_order": order,
                    "sample_id": sample_id,
                    "story": parts["story"],
                    "question": parts["question"],
                    "answer": parts["answer"],
                    "choices": parts["choices"],
                    "sample_index": sample,
                    "source_txt": match.group(0),
                },
            )
        )
    if not rows:
        raise BadInputError(f"{folder}: no Hi-ToM order_k.txt files under this folder")
    return rows


def read(path: Path | None, prompting: str, drop_disputed: bool, oracle: bool) -> list[Example]:
    if path is not None and path.is_dir() and not any((path / n).is_file() for n in ("hitom_data.jsonl", "Hi-ToM_data.json")):
        rows = _rows_from_txt_folder(path)
    else:
        file = find_file("hitom", CARD, path, ["hitom_data.jsonl", "Hi-ToM_data.json", "hitom/hitom_data.jsonl", "hitom/Hi-ToM_data.json"])
        rows = list(read_json_rows(file))
    examples = [_example(row, where) for where, row in rows]
    if prompting != "both":
        examples = [e for e in examples if e.meta["prompting_type"] == prompting]
    if not examples:
        raise BadInputError(f"hitom: no rows with prompting_type {prompting!r}")
    if oracle or drop_disputed:
        examples = flag_disputes(examples, style="hitom")
    if drop_disputed:
        if any(e.meta["oracle_disputes"] is None for e in examples):
            raise BadInputError("hitom: drop_disputed=true needs the belief oracle (tomrl.world), which could not check every row")
        examples = [e for e in examples if not e.meta["oracle_disputes"]]
    return examples


LOADERS = [Loader("hitom", CARD, read, OPTIONS)]
