"""A unified-schema JSONL file as a data set, so recipes can use data you made or converted yourself.

    tomrl data load jsonl --path my_questions.jsonl --out checked.jsonl     # validates every line
    # in a recipe:  - {name: mine, loader: jsonl, path: data/my_questions.jsonl, split: test}

Rows are read with :func:`tomrl.data_checks.read_checked_examples`: the schema plus the answer
checks (errors name the file, line and field).
Rows written from an evaluation-only data set keep ``meta["evaluation_only"]``, and recipes refuse
such rows in training and validation splits whatever loader brought them in.
"""

from __future__ import annotations

from pathlib import Path

from tomrl.config import ConfigError
from tomrl.loaders.base import DatasetCard, Loader
from tomrl.schema import Example

CARD = DatasetCard(
    title="A unified-schema JSONL file of your own (tomrl data load / generate output)",
    source="the file given with --path (or path: in a recipe)",
    license="the file's own",
    paper="—",
    files=(),
    counts={},
    known_problems=("Whatever its origin has: check the card of the data set it came from (meta['evaluation_only'] is honoured).",),
)


def read(path: Path | None) -> list[Example]:
    if path is None:
        raise ConfigError("loader 'jsonl' needs a file: pass --path FILE (or path: in a recipe component)")
    from tomrl.data_checks import read_checked_examples

    return read_checked_examples(path)


LOADERS = [Loader("jsonl", CARD, read, {})]
