"""Adversarially filtered generation: draw a larger pool, keep the questions an agent-blind learner misses.

    from tomrl.generators import generate
    from tomrl.generators.config import GenerateConfig
    examples = generate(GenerateConfig(benchmark="hitom", n=600, orders=[1, 2, 3], adversarial_filter=True))

or ``tomrl data generate hitom --config configs/generate/hitom_default.yaml adversarial_filter=true``.

With ``adversarial_filter`` the generator first draws a pool of ``adversarial_pool`` × ``n``
questions (the same config and seed, :func:`pool_config`), then :func:`keep_unpredictable` runs
AFLite (:func:`tomrl.audit.learner.adversarial_filter`, Le Bras et al. 2020) on each *slot* of the
plan apart — a Hi-ToM order, a ToMi question type and asked agent (with ``shortcut_neutral``, which
picks the agent itself, the question type alone) — with its defaults (logistic
regression, 16 random halves by story per round, at most half of a slot removed), seeded with the
config's seed. Filtering each slot apart keeps every slot's questions from being spent on another
slot that happens to be easier to predict. Of the survivors, the first ones of each slot in the
pool's own (seeded) order are kept, as many as the generator's plan gives that slot for ``n``
questions (:func:`slot_quotas`); a slot with too few survivors is an error that names it.

Questions of order 0 (Hi-ToM: where the object really is; ToMi: reality and memory) are not
filtered: the story order fixes their answer (its last or first place), so no filter can make them
unpredictable; they are taken from the pool in order. The filter only drops questions, so every
label is the oracle's as before; splits are assigned afterwards, per story, as without the filter.

What the filter cannot promise: it removes what *its* learner predicts, and a set with those
removed can carry a pattern of its own (the gold is *not* where the learner would look), which a
different learner fitted on another filtered set may pick up. ``tomrl data neutrality`` measures
that on fresh seeds. On configs/generate/hitom_default.yaml with n=600, orders 1-3, lengths 1-2,
seeds 301-303 (pooled), the learner fitted on the other seeds' sets was +9.5, +13.1 and +23.2
points above chance at orders 1, 2, 3 (unfiltered: +23.8, +25.0, +35.4): less learnable, not
neutral; ``shortcut_neutral`` is the generator that is. The kept questions also lean towards
objects with more places (chance fell from 36-37 % to 29-35 %), since those are harder to guess.

On top of ``shortcut_neutral`` (configs/generate/hitom_neutral_test.yaml, seeds 101-103 × 600) the
filter adds nothing a learner fitted elsewhere can see (it was at chance and stays within 5 points)
and leaves the filtered set's own cross-fitted learner 5-7 points *below* chance on orders 1, 3 and
4 (the removed questions were those it got right), which ``tomrl data neutrality`` flags; so the
shipped neutral configs and the demo do not use it (docs/datasets.md).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace
from typing import Hashable

from tomrl.generators import tomi
from tomrl.generators.config import GenerateConfig
from tomrl.schema import Example

# (story_id, story kind for the split stratification, the story's examples): what the generators hand to the splitter
Story = tuple[str, tuple, list[Example]]


def pool_config(cfg: GenerateConfig) -> GenerateConfig:
    """The config of the pool the filter draws from: ``adversarial_pool`` × ``n`` questions, no filter."""
    return replace(cfg, n=pool_size(cfg), adversarial_filter=False)


def pool_size(cfg: GenerateConfig) -> int:
    return max(cfg.n, round(cfg.adversarial_pool * cfg.n))


def slot_of(example: Example, cfg: GenerateConfig) -> Hashable:
    """The plan slot of a generated question: its order (Hi-ToM) or question type and asked agent (ToMi;
    with ``shortcut_neutral`` the question type alone, since the neutral generator picks the agent)."""
    if cfg.benchmark == "hitom":
        return example.order
    return (example.question_type, None if cfg.shortcut_neutral else example.meta["asked_agent"])


def slot_name(slot: Hashable, cfg: GenerateConfig) -> str:
    if cfg.benchmark == "hitom":
        return f"order {slot}"
    question_type, asked = slot  # type: ignore[misc]
    return question_type if asked is None else f"{question_type} (asked agent {asked})"


def slot_quotas(cfg: GenerateConfig) -> dict[Hashable, int]:
    """Questions per slot for ``cfg.n``, as the generator's plan deals them: slots cycled in a fixed order
    (ToMi: :data:`tomrl.generators.tomi.TOMI_SLOTS`; Hi-ToM: the orders, in a seeded shuffle that decides
    which orders get one question more when ``n`` is not a multiple of their number)."""
    if cfg.benchmark == "hitom":
        cycle: list[Hashable] = list(cfg.orders)
        random.Random(f"tomrl-hitom-adversarial-quota:{cfg.seed}").shuffle(cycle)
    else:
        cycle = [(kind, None if cfg.shortcut_neutral or not roles else roles[0])
                 for kind, roles in tomi.TOMI_SLOTS if kind in cfg.tomi_question_types]
    return dict(Counter(cycle[k % len(cycle)] for k in range(cfg.n)))


def keep_unpredictable(pool: list[Story], cfg: GenerateConfig) -> list[Story]:
    """The stories of ``pool`` with only the kept questions (see the module docstring); stories left
    without a question are dropped. Deterministic in ``pool`` and ``cfg.seed``."""
    # scikit-learn is imported here, not at the top: every `tomrl` command line imports the generators to
    # build its parser, and `--help` (and `tomrl data check` on a 50 MB line) must stay light.
    from tomrl.audit.learner import adversarial_filter

    examples = [e for _, _, story_examples in pool for e in story_examples]
    by_slot: dict[Hashable, list[Example]] = {}
    for e in examples:
        by_slot.setdefault(slot_of(e, cfg), []).append(e)
    kept: set[str] = set()
    for slot, quota in slot_quotas(cfg).items():
        members = by_slot.get(slot, [])
        survivors = members if (members and members[0].order == 0) else adversarial_filter(members, seed=cfg.seed)
        if len(survivors) < quota:
            raise ValueError(
                f"adversarial_filter: {slot_name(slot, cfg)} has {len(survivors)} of its {len(members)} pooled questions "
                f"left after the filter but needs {quota}; raise adversarial_pool (now {cfg.adversarial_pool})"
            )
        kept.update(e.id for e in survivors[:quota])
    filtered = [(story_id, kind, [e for e in story_examples if e.id in kept]) for story_id, kind, story_examples in pool]
    return [story for story in filtered if story[2]]
