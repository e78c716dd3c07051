"""What every benchmark loader shares: the dataset card, the loader record, where data lives, and
the small checks that make a bad input file fail with its path, row and field.

    from tomrl.loaders.base import data_root, story_key
    data_root()                    # $TOMRL_DATA, else <repo>/../shared/data
    story_key("A went.\\nB came.")  # "A went. B came." — the identity used to compare stories

A loader module (``hitom.py``, ``tomi.py`` …) defines one or more :class:`Loader` records; the
registry (:mod:`tomrl.loaders.registry`) collects them by name.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from tomrl.config import ConfigError
from tomrl.io import BadInputError, loads_json, open_input, scan_jsonl
from tomrl.schema import Example

DATA_ENV = "TOMRL_DATA"


class DataMissingError(BadInputError):
    """The data set's files are not there (as opposed to being there and wrong)."""


@dataclass(frozen=True)
class DatasetCard:
    """What a user must know before training or evaluating on a data set."""

    title: str
    source: str  # where the files come from (repository, commit, path)
    license: str
    paper: str
    files: tuple[str, ...]  # default files, relative to the data root
    counts: dict[str, int]  # documented counts for the default options; "rows" is what load() returns
    known_problems: tuple[str, ...]  # label noise, format quirks, leakage
    evaluation_only: bool = False  # the authors forbid training on it: recipes refuse it in train/validation
    how_to_obtain: str = ""  # shown when the files are missing
    notes: tuple[str, ...] = ()  # how fields map onto Example (order, question_type, …)


@dataclass(frozen=True)
class LoaderOption:
    default: Any
    help: str
    choices: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class Loader:
    """A named way to turn source files into :class:`Example` records."""

    name: str
    card: DatasetCard
    read: Callable[..., list[Example]]  # read(path: Path | None, **options)
    options: dict[str, LoaderOption] = field(default_factory=dict)

    def load(self, path: str | Path | None = None, **options: Any) -> list[Example]:
        values = self.resolve_options(options)
        examples = self.read(Path(path) if path is not None else None, **values)
        if self.card.evaluation_only:
            # Every row carries the restriction, so a copy written to JSONL keeps it.
            examples = [e.replace(meta={**e.meta, "evaluation_only": True}) for e in examples]
        return examples

    def resolve_options(self, options: dict[str, Any]) -> dict[str, Any]:
        values = {}
        for key, value in options.items():
            if key not in self.options:
                allowed = ", ".join(sorted(self.options)) or "none"
                raise ConfigError(f"loader '{self.name}': unknown option '{key}' (options: {allowed})")
            spec = self.options[key]
            if spec.choices is not None and value not in spec.choices:
                raise ConfigError(
                    f"loader '{self.name}': option '{key}' must be one of {', '.join(map(repr, spec.choices))}, got {value!r}"
                )
            if isinstance(spec.default, bool) and not isinstance(value, bool):
                raise ConfigError(f"loader '{self.name}': option '{key}' must be true or false, got {value!r}")
            values[key] = value
        for key, spec in self.options.items():
            values.setdefault(key, spec.default)
        return values


# ---------------------------------------------------------------------------------------- paths


def default_data_root() -> Path:
    """``<repo>/../shared/data`` for a source checkout (this file is ``<repo>/src/tomrl/loaders/base.py``)."""
    return Path(__file__).resolve().parents[3].parent / "shared" / "data"


def data_root() -> Path:
    """The folder holding the benchmark folders: ``$TOMRL_DATA`` if set, else :func:`default_data_root`."""
    env = os.environ.get(DATA_ENV)
    return Path(env).expanduser() if env else default_data_root()


def find_file(loader_name: str, card: DatasetCard, path: Path | None, candidates: Iterable[str]) -> Path:
    """The file to read: ``path`` itself, the first of ``candidates`` inside ``path`` (a folder),
    or inside the data root when no path is given. Missing data is an error that says how to get it."""
    candidates = list(candidates)
    if path is not None:
        if path.is_file():
            return path
        if path.is_dir():
            for name in candidates:
                if (path / name).is_file():
                    return path / name
            raise DataMissingError(
                f"{path}: none of {', '.join(candidates)} found in this folder for loader '{loader_name}'"
                + (f". {card.how_to_obtain}" if card.how_to_obtain else "")
            )
        raise DataMissingError(f"{path}: file not found (loader '{loader_name}')" + (f". {card.how_to_obtain}" if card.how_to_obtain else ""))
    root = data_root()
    for name in candidates:
        if (root / name).is_file():
            return root / name
    where = f"${DATA_ENV}={root}" if os.environ.get(DATA_ENV) else str(root)
    raise DataMissingError(
        f"loader '{loader_name}': data not found: looked for {', '.join(candidates)} under {where}. "
        f"Set {DATA_ENV} to the folder holding the benchmark folders, or pass --path FILE."
        + (f" {card.how_to_obtain}" if card.how_to_obtain else "")
    )


# ------------------------------------------------------------------------------- reading rows


def read_json_file(path: Path) -> Any:
    """A JSON file's value; bad bytes, bad JSON and duplicate keys raise BadInputError naming the file.
    Opened with :func:`tomrl.io.open_input`: a FIFO that nobody writes to is one error, not a wait without end."""
    with open_input(path, "a JSON file") as handle:
        raw = handle.read()
    try:
        return loads_json(raw.decode("utf-8"), str(path))
    except UnicodeDecodeError as err:
        raise BadInputError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None


def read_json_rows(path: Path, data: Any = None) -> Iterator[tuple[str, dict]]:
    """``(where, row)`` for each object of a JSONL file, or of a JSON file holding a list of objects
    (or ``{"data": [...]}``; ``data``: that file's value, already read). ``where`` is ``"file:line"`` /
    ``"file:row N"`` for error messages."""
    if path.suffix == ".jsonl" and data is None:
        for line_number, obj, error in scan_jsonl(path):
            if error is not None:
                raise BadInputError(error)
            yield f"{path}:{line_number}", obj
        return
    data = read_json_file(path) if data is None else data
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        data = data["data"]
    if not isinstance(data, list):
        raise BadInputError(f"{path}: expected a JSON list of rows (or {{\"data\": [...]}}), got {type(data).__name__}")
    for index, obj in enumerate(data):
        if not isinstance(obj, dict):
            raise BadInputError(f"{path}: row {index}: expected an object, got {type(obj).__name__}")
        yield f"{path}: row {index}", obj


_MISSING = object()


def field_of(row: dict, name: str, where: str, kind: type | tuple[type, ...], *, optional: bool = False) -> Any:
    """``row[name]`` checked against ``kind``; errors name the file, row and field."""
    value = row.get(name, _MISSING)
    if value is _MISSING:
        if optional:
            return None
        raise BadInputError(f"{where}: field '{name}': missing")
    if value is None and optional:
        return None
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if bool not in kinds and isinstance(value, bool) and (int in kinds or float in kinds):
        raise BadInputError(f"{where}: field '{name}': expected {_names(kinds)}, got a boolean")
    if not isinstance(value, kinds):
        got = "null" if value is None else type(value).__name__
        raise BadInputError(f"{where}: field '{name}': expected {_names(kinds)}, got {got}")
    if isinstance(value, str) and not value.strip() and not optional:
        raise BadInputError(f"{where}: field '{name}': empty")
    return value


def _names(kinds: tuple[type, ...]) -> str:
    words = {str: "a string", int: "an integer", float: "a number", bool: "true or false", list: "a list", dict: "an object"}
    return " or ".join(words.get(k, k.__name__) for k in kinds)


def int_of(row: dict, name: str, where: str, *, optional: bool = False) -> int | None:
    """An integer field that may arrive as a float (pandas/parquet writes 4.0 for 4)."""
    value = field_of(row, name, where, (int, float), optional=optional)
    if value is None:
        return None
    if isinstance(value, float):
        if value != value or value != int(value):  # NaN or fractional
            raise BadInputError(f"{where}: field '{name}': expected an integer, got {value!r}")
        return int(value)
    return value


# --------------------------------------------------------------------------------- story text


def story_lines(text: str) -> list[str]:
    """A story's lines without Hi-ToM's line numbers, ``***`` separators and blank lines."""
    lines = (re.sub(r"^\s*\d+\s+", "", raw).strip() for raw in text.splitlines())
    return [line for line in lines if line and set(line) - {"*"}]


def story_key(text: str) -> str:
    """A story's identity for comparisons: :func:`story_lines` joined, whitespace collapsed. The ToM-RL
    release joins training stories with spaces and test stories with newlines; under this key the same
    story is the same string."""
    return " ".join(" ".join(story_lines(text)).split())


def story_keys(example: Example) -> set[str]:
    """The keys a row's story is known by: its text's, and its structured form's where the row keeps
    one (ExploreToM infilled stories retell ``meta["story_structure"]``)."""
    keys = {story_key(example.story)}
    structured = example.meta.get("story_structure")
    if isinstance(structured, str) and structured.strip():
        keys.add(story_key(structured))
    return keys


def story_hash(text: str, length: int = 12) -> str:
    return hashlib.sha1(story_key(text).encode("utf-8")).hexdigest()[:length]


def story_sentence_count(text: str) -> int:
    """Sentences in a story: lines where it has lines, otherwise sentence ends."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) > 1:
        return len(lines)
    return max(1, len(re.findall(r"[.!?](?:\s|$)", text)))


def hitom_question_type(order: int) -> str:
    """Hi-ToM question type by order: ``reality`` (0), ``first_order`` … ``fourth_order``."""
    names = {0: "reality", 1: "first_order", 2: "second_order", 3: "third_order", 4: "fourth_order"}
    if order not in names:
        raise ValueError(f"Hi-ToM order must be 0-4, got {order}")
    return names[order]


def tomi_order(question_type: str) -> int:
    """ToMi's question type as a ToM order: memory and reality 0, first_order 1, second_order 2."""
    if question_type in ("memory", "reality"):
        return 0
    if question_type.startswith("first_order"):
        return 1
    if question_type.startswith("second_order"):
        return 2
    raise ValueError(f"unknown ToMi question type {question_type!r}")


def parse_choice_list(text: str) -> list[str]:
    """``"A. blue_drawer, B. green_crate, …"`` → ``["blue_drawer", "green_crate", …]``."""
    parts = re.split(r"(?:^|,\s*)[A-Z]\.\s*", text.strip())
    return [p.strip() for p in parts if p.strip()]
