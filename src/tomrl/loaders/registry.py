"""Every benchmark loader by name, and the one call that runs them.

    from tomrl.loaders.registry import LOADERS, load
    examples = load("hitom")                                  # 600 Examples (CoT-prompt labels)
    examples = load("tomi", split="train")                    # loader options as keywords
    examples = load("hitom", path="~/Hi-ToM_data.json")       # a user's own copy of the original file
    LOADERS["opentom"].card.evaluation_only                   # True

Names: ``hitom``, ``tomi``, ``exploretom``, ``opentom``, ``fantom`` (the original benchmarks);
``tomrl-paper-train``, ``tomrl-paper-test-merged``, ``tomrl-paper-hitom-pool``,
``tomrl-paper-hitom600``, ``tomrl-paper-hitom4``, ``tomrl-paper-tomi``, ``tomrl-paper-exploretom``,
``tomrl-paper-exploretom-infilled`` (the ToM-RL release; the last five are Paper A's evaluation
sets exactly as the paper used them); ``jsonl`` (a unified JSONL file of your own, ``--path``).
``tomrl data load --list`` prints them; ``tomrl data load NAME --card`` shows a card.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from tomrl.config import ConfigError
from tomrl.io import BadInputError
from tomrl.loaders import exploretom, fantom, hitom, jsonl_file, opentom, tomi, tomrl_paper
from tomrl.loaders.base import DatasetCard, Loader
from tomrl.schema import FIELD_NAMES, Example, example_from_dict

LOADERS: dict[str, Loader] = {
    loader.name: loader
    for module in (hitom, tomi, exploretom, opentom, fantom, tomrl_paper, jsonl_file)
    for loader in module.LOADERS
}


def get_loader(name: str) -> Loader:
    if name not in LOADERS:
        import difflib

        close = difflib.get_close_matches(name, list(LOADERS), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ConfigError(f"unknown data set '{name}'{hint}; known: {', '.join(LOADERS)}")
    return LOADERS[name]


def card(name: str) -> DatasetCard:
    return get_loader(name).card


def is_evaluation_only(example: Example) -> bool:
    """The one rule for data whose authors forbid training on it (OpenToM): the row carries
    ``meta["evaluation_only"]`` (such a loader marks every row, and JSONL copies keep the mark), or its
    ``source`` names a data set whose card says so."""
    loader = LOADERS.get(example.source)
    return bool(example.meta.get("evaluation_only")) or (loader is not None and loader.card.evaluation_only)


def refuse_evaluation_only(examples: Iterable[Example], purpose: str) -> None:
    """Raise ConfigError naming the first evaluation-only example, which may not be used for ``purpose``."""
    for example in examples:
        if is_evaluation_only(example):
            raise ConfigError(
                f"example {example.id!r} ({example.source}) is evaluation-only data (its authors forbid training on it) "
                f"and cannot go into {purpose}"
            )


def load(name: str, path: str | Path | None = None, **options: Any) -> list[Example]:
    """Load data set ``name`` (from ``path`` if given, else the data root) as validated Examples.

    Validated: the schema's checks, unique ids, and :func:`tomrl.data_checks.validate_answers_in_story`
    (an answer that cannot be right, e.g. a Hi-ToM/ToMi answer the story never names, raises
    :class:`~tomrl.io.BadInputError` naming the data set, the example and the field ``answer``).
    """
    from tomrl.data_checks import validate_answers_in_story

    loader = get_loader(name)
    examples = loader.load(Path(path).expanduser() if path is not None else None, **options)
    seen: set[str] = set()
    for example in examples:
        # The schema's own checks, on a shallow view (Example.to_dict deep-copies every meta value).
        example_from_dict({field: getattr(example, field) for field in FIELD_NAMES}, f"{name}:{example.id}")
        if example.id in seen:
            raise ConfigError(f"loader '{name}' produced the id {example.id!r} twice")
        seen.add(example.id)
    try:
        validate_answers_in_story(examples)
    except BadInputError as err:
        origin = f" ({Path(path).expanduser()})" if path is not None else ""
        raise BadInputError(f"data set '{name}'{origin}: {err}") from None
    return examples


def cards_markdown() -> str:
    """Every loader's card as Markdown (the generated part of docs/datasets.md)."""
    lines = []
    for name, loader in LOADERS.items():
        c = loader.card
        lines += [f"### `{name}` — {c.title}", ""]
        if c.evaluation_only:
            lines += ["**Evaluation only**: its authors forbid training on it; recipes refuse it in train and validation splits.", ""]
        lines += [f"- Source: {c.source}", f"- License: {c.license}", f"- Paper: {c.paper}"]
        if c.files:
            lines.append(f"- Files (under the data root): {', '.join(f'`{f}`' for f in c.files)}")
        if c.counts:
            lines.append("- Counts (default options): " + "; ".join(f"{k} {v:,}" for k, v in c.counts.items()))
        else:
            lines.append("- Counts: not verified here (no copy of the data is available)")
        if loader.options:
            lines.append("- Options: " + "; ".join(
                f"`{k}={o.default}`" + (f" ({' / '.join(map(str, o.choices))})" if o.choices else "") + f" — {o.help}"
                for k, o in loader.options.items()))
        lines.append("- Known problems:")
        lines += [f"  - {p}" for p in c.known_problems]
        if c.notes:
            lines.append("- Mapping to the example record:")
            lines += [f"  - {n}" for n in c.notes]
        if c.how_to_obtain:
            lines.append(f"- How to obtain: {c.how_to_obtain}")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":  # python -m tomrl.loaders.registry  -> the cards block of docs/datasets.md
    print(cards_markdown(), end="")
