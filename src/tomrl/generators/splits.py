"""Story-disjoint train/validation/test splits and story identities.

    from tomrl.generators.splits import assign_splits, check_story_disjoint, story_id_for
    split_of = assign_splits(story_ids, strata, {"train": 0.8, "test": 0.2})   # story_id -> split
    check_story_disjoint(examples)       # ValueError naming a story found in two splits

A split is assigned per *story*, never per question, so every question about a story lands in
the same split. Story ids are content hashes of the story text, so the same story generated in
two runs (or two seeds) gets the same id and an audit of two files finds it.
"""

from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from typing import Hashable, Iterable, Mapping, Sequence

from tomrl.schema import SPLITS, Example


def story_id_for(source: str, story_text: str) -> str:
    """``"{source}-{first 16 hex digits of sha256(story text)}"``: equal stories, equal ids."""
    digest = hashlib.sha256(story_text.encode("utf-8")).hexdigest()[:16]
    return f"{source}-{digest}"


def split_counts(total: int, fractions: Mapping[str, float]) -> dict[str, int]:
    """Whole numbers of stories per split summing to ``total`` (largest remainders; ties in SPLITS order)."""
    names = [name for name in SPLITS if name in fractions]
    exact = {name: total * fractions[name] for name in names}
    counts = {name: int(exact[name]) for name in names}
    left = total - sum(counts.values())
    by_remainder = sorted(names, key=lambda name: (-(exact[name] - counts[name]), names.index(name)))
    for name in by_remainder[:left]:
        counts[name] += 1
    return counts


def assign_splits(
    story_ids: Sequence[str],
    strata: Sequence[Hashable],
    fractions: Mapping[str, float],
    seed: int,
) -> dict[str, str]:
    """Map each story to a split, in the given fractions, stratified by ``strata`` (one per story).

    The stories of each stratum are shuffled (seeded) and interleaved across strata; splits are
    then dealt out by smooth weighted round-robin, which gives exactly ``split_counts`` stories
    per split and close to the same fractions within every stratum.
    """
    if len(story_ids) != len(strata):
        raise ValueError("story_ids and strata must have the same length")
    if len(set(story_ids)) != len(story_ids):
        raise ValueError("story ids must be unique")
    rng = random.Random(f"tomrl-splits:{seed}")
    groups: dict[Hashable, list[str]] = defaultdict(list)
    for story_id, stratum in zip(story_ids, strata):
        groups[stratum].append(story_id)
    queues = []
    for stratum in sorted(groups, key=repr):
        members = sorted(groups[stratum])
        rng.shuffle(members)
        queues.append(members)
    interleaved: list[str] = []
    position = 0
    while any(position < len(q) for q in queues):
        interleaved.extend(q[position] for q in queues if position < len(q))
        position += 1
    counts = split_counts(len(story_ids), fractions)
    names = [name for name in counts if counts[name] > 0]
    credit = {name: 0 for name in names}
    total = sum(counts.values())
    assignment: dict[str, str] = {}
    for story_id in interleaved:
        for name in names:
            credit[name] += counts[name]
        chosen = max(names, key=lambda name: (credit[name], -names.index(name)))
        credit[chosen] -= total
        assignment[story_id] = chosen
    return assignment


def check_story_disjoint(examples: Iterable[Example]) -> dict[str, int]:
    """Raise ``ValueError`` if a story id or story text appears in two splits; else stories per split."""
    split_of_id: dict[str, str] = {}
    split_of_text: dict[str, str] = {}
    for example in examples:
        for key, table in ((example.story_id, split_of_id), (example.story, split_of_text)):
            seen = table.setdefault(key, example.split)
            if seen != example.split:
                raise ValueError(
                    f"story {example.story_id} (example {example.id}) is in both '{seen}' and '{example.split}'"
                )
    per_split: dict[str, int] = defaultdict(int)
    for split in split_of_id.values():
        per_split[split] += 1
    return dict(per_split)
