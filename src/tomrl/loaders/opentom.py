"""OpenToM (Xu et al., 2024): narrative ToM questions of four genres — EVALUATION ONLY.

    tomrl data load opentom --out opentom.jsonl                 # 13,708 questions over 596 stories
    tomrl data load opentom long=true --out opentom_long.jsonl # OpenToM-L: 2,300 questions, long narratives
    tomrl data load opentom --path ~/OpenToM/data/opentom_data --out opentom.jsonl

The authors state the benchmark "shall not be used for training or fine-tuning": every example
carries ``meta["evaluation_only"] = True``, the card says so, and recipes that put OpenToM in a
training or validation split fail (:mod:`tomrl.loaders.recipes`).

Reads the JSONL conversion in ``shared/data/opentom`` (``opentom_meta.jsonl``,
``opentom_meta_long.jsonl``, ``opentom_questions.jsonl``) or the official
``data/opentom_data/`` folder (``meta_data.json``, ``meta_data_long.json`` and the per-genre files
``attitude.json``, ``location_{cg,fg}_{fo,so}[_new].json``, ``multihop_{fo,so}.json``).

question_type = the genre (``attitude``, ``location_coarse``, ``location_fine``,
``multihop_fullness``, ``multihop_accessibility``); order = 1 or 2 (first/second order), 0 for
the narrator's-perspective (reality / memory) location questions, null for attitude.
"""

from __future__ import annotations

from pathlib import Path

from tomrl.io import BadInputError
from tomrl.loaders.base import DatasetCard, Loader, LoaderOption, field_of, find_file, read_json_file, read_json_rows, story_sentence_count
from tomrl.schema import Example

CARD = DatasetCard(
    title="OpenToM: narrative ToM questions (location, multi-hop, attitude) — evaluation only",
    source="github.com/seacowx/OpenToM @ 3f22b66 data/opentom_data/*.json; HF SeacowX/OpenToM",
    license="CC BY-NC 4.0; the authors forbid training or fine-tuning on it",
    paper="Xu et al., OpenToM: A Comprehensive Benchmark for Evaluating Theory-of-Mind Reasoning Capabilities of LLMs, ACL 2024 (arXiv:2402.06044)",
    files=("opentom/opentom_questions.jsonl", "opentom/opentom_meta.jsonl", "opentom/opentom_meta_long.jsonl"),
    counts={
        "rows": 13708,
        "stories": 596,
        "rows with long=true": 2300,
        "attitude": 596,
        "location_coarse": 2384,
        "location_fine": 3576,
        "multihop_fullness": 4768,
        "multihop_accessibility": 2384,
        "narrator's-perspective (order 0) rows": 1192,
    },
    known_problems=(
        "EVALUATION ONLY: the authors state the benchmark shall not be used for training or fine-tuning.",
        "About 40 stories with observed=True have a plot saying the observer 'did not witness' the move.",
        "Container strings are not normalised ('the the trash can', 'a donation bin'): compare answers leniently.",
        "Second-order labels from the mover's perspective are not a deterministic function of the plot fields.",
    ),
    evaluation_only=True,
    notes=(
        "story = narrative (long=true: long_narrative); meta keeps plot, plot_info, observed, personality, genre, subgenre.",
        "order: location/multihop first-order 1, second-order 2, narrator's perspective 0, attitude null.",
    ),
)

OPTIONS = {"long": LoaderOption(False, "OpenToM-L: the 100 long narratives and their 2,300 questions")}

# Per-genre files of data/opentom_data/, in the order the conversion lists them.
_GENRE_FILES = (
    ("attitude.json", "attitude", None),
    ("location_cg_fo.json", "location_coarse", 1),
    ("location_cg_so.json", "location_coarse", 2),
    ("location_fg_fo_new.json", "location_fine", 1),
    ("location_fg_so_new.json", "location_fine", 2),
    ("multihop_fo.json", "multihop", 1),
    ("multihop_so.json", "multihop", 2),
)


def _subgenre(genre: str, question: str) -> str:
    if genre != "multihop":
        return genre
    return "multihop_fullness" if "fullness" in question else "multihop_accessibility"


def _order(genre: str, order: int | None, question: str) -> int | None:
    if genre == "attitude":
        return None
    if question.startswith("From narrator's perspective"):
        return 0  # reality / memory questions asked from no character's perspective
    return order


def _read_meta(file: Path) -> dict[str, dict]:
    """story_id -> meta row, from the JSONL conversion or the official ``{story_id: {...}}`` JSON."""
    if file.suffix == ".jsonl":
        return {field_of(row, "story_id", where, str): row for where, row in read_json_rows(file)}
    data = read_json_file(file)
    if not isinstance(data, dict):
        raise BadInputError(f"{file}: expected an object of story_id -> story")
    return {str(k): {**v, "story_id": str(k)} for k, v in data.items()}


def _question_rows_official(folder: Path) -> list[tuple[str, dict]]:
    rows = []
    for name, genre, order in _GENRE_FILES:
        file = folder / name
        if not file.is_file() and name.endswith("_new.json"):
            file = folder / name.replace("_new.json", ".json")
        if not file.is_file():
            raise BadInputError(f"{folder}: OpenToM file {name} not found")
        data = read_json_file(file)
        if not isinstance(data, dict):
            raise BadInputError(f"{file}: expected an object of story_id -> list of questions")
        for story_id, questions in data.items():
            if not isinstance(questions, list):
                raise BadInputError(f"{file}: story {story_id}: expected a list of questions")
            for index, q in enumerate(questions):
                where = f"{file}: story {story_id} question {index}"
                if not isinstance(q, dict):
                    raise BadInputError(f"{where}: expected an object")
                question = field_of(q, "question", where, str)
                rows.append(
                    (
                        where,
                        {
                            "story_id": str(story_id),
                            "source_file": file.name,
                            "index_in_story": index,
                            "genre": genre,
                            "subgenre": _subgenre(genre, question),
                            "order": order,
                            "question": question,
                            "answer": q.get("answer"),
                            "type": q.get("type"),
                        },
                    )
                )
    return rows


def read(path: Path | None, long: bool) -> list[Example]:
    official = path is not None and path.is_dir() and (path / "meta_data.json").is_file()
    if official:
        metas = _read_meta(path / "meta_data.json")
        long_metas = _read_meta(path / "meta_data_long.json") if (path / "meta_data_long.json").is_file() else {}
        question_rows = _question_rows_official(path)
    else:
        questions_file = find_file("opentom", CARD, path, ["opentom_questions.jsonl", "opentom/opentom_questions.jsonl"])
        folder = questions_file.parent
        metas = _read_meta(find_file("opentom", CARD, folder, ["opentom_meta.jsonl"]))
        long_file = folder / "opentom_meta_long.jsonl"
        long_metas = _read_meta(long_file) if long_file.is_file() else {}
        question_rows = list(read_json_rows(questions_file))
    if long and not long_metas:
        raise BadInputError("opentom: long=true needs the long narratives (opentom_meta_long.jsonl or meta_data_long.json)")
    examples = []
    for where, row in question_rows:
        story_id = str(field_of(row, "story_id", where, (str, int)))
        if long and story_id not in long_metas:
            continue
        meta_row = (long_metas if long else metas).get(story_id)
        if meta_row is None:
            raise BadInputError(f"{where}: field 'story_id': story {story_id} is not in the OpenToM meta file")
        narrative_field = "long_narrative" if long else "narrative"
        story = field_of(meta_row, narrative_field, f"OpenToM meta story {story_id}", str).strip()
        genre = field_of(row, "genre", where, str)
        question = field_of(row, "question", where, str)
        answer = field_of(row, "answer", where, str)
        subgenre = field_of(row, "subgenre", where, str, optional=True) or _subgenre(genre, question)
        order = _order(genre, row.get("order"), question)
        source_file = str(row.get("source_file") or genre)
        index = row.get("index_in_story", len(examples))
        examples.append(
            Example(
                id=f"opentom-{story_id}-{source_file.removesuffix('.json')}-{index}" + ("-long" if long else ""),
                source="opentom",
                split="test",
                story=story,
                question=question.strip(),
                answer=answer.strip(),
                order=order,
                question_type=subgenre,
                deception=None,
                story_length=story_sentence_count(story.replace("\n", " ")),
                story_id=f"opentom-{story_id}",
                choices=None,
                meta={
                    "genre": genre,
                    "subgenre": subgenre,
                    "perspective": "narrator" if question.startswith("From narrator's perspective") else "character",
                    "source_order": row.get("order"),
                    "type": row.get("type"),
                    "plot": meta_row.get("plot"),
                    "plot_info": meta_row.get("plot_info"),
                    "observed": meta_row.get("observed"),
                    "personality": meta_row.get("personality"),
                    "long": long,
                },
            )
        )
    if not examples:
        raise BadInputError("opentom: no questions loaded")
    return examples


LOADERS = [Loader("opentom", CARD, read, OPTIONS)]
