"""What ``tomrl data generate`` makes: the typed config of the Hi-ToM and ToMi generators.

    from tomrl.config import load_config
    from tomrl.generators.config import GenerateConfig
    cfg = load_config(GenerateConfig, "configs/generate/hitom_default.yaml", ["n=200", "orders=[0, 1]"])

or on the command line: ``tomrl data generate hitom --n 200 --orders 0,1 --out easy.jsonl``.
Every field below can be set in a YAML file under configs/generate/ or as ``key=value``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from tomrl.config import setting
from tomrl.schema import SPLITS

TomiQuestionType = Literal["first_order", "second_order", "reality", "memory"]
TomiStoryType = Literal["true_belief", "false_belief", "second_order_false_belief"]
HITOM_MAX_ORDER = 4
HITOM_MAX_CHAPTERS = 4
# Shortcut-neutral counterfactual pairs: agents a belief chain must leave out (tomrl.generators.pairs, "Limits").
NEUTRAL_PAIR_SPARE_AGENTS = 2


@dataclass(frozen=True)
class GenerateConfig:
    benchmark: Literal["hitom", "tomi"] = setting("hitom", help="story style: 'hitom' (chapters, orders 0-4, deception) or 'tomi'")
    n: int = setting(1000, help="number of questions (examples) to generate")
    seed: int = setting(0, help="random seed; the same config and seed give byte-identical output")
    stories: int | None = setting(
        None,
        help="number of distinct stories the n questions are asked about (spread evenly, distinct orders or "
        "question types per story where possible); null = one story per question",
    )
    split_fractions: dict[str, float] = setting(
        default_factory=lambda: {"train": 1.0},
        help="fraction of stories per split, e.g. {train: 0.8, validation: 0.1, test: 0.1}; splits are assigned "
        "per story (never sharing one) and stratified by story kind",
    )
    exclude_stories_from: list[str] = setting(
        default_factory=list,
        help="JSONL files (unified schema) whose stories must not be generated again, e.g. a test set",
    )
    semantics: Literal["joint", "ordered"] = setting(
        "joint",
        help="belief-update rule of the labels: 'joint' (Hi-ToM CoT-prompt labels, ToMi) or 'ordered' "
        "(the Hi-ToM generator code, Hi-ToM VP labels); see tomrl.world.oracle",
    )
    distractor_prob: float = setting(0.1, help="probability of a distractor sentence after each story sentence")
    vocabulary: Literal["all", "train", "heldout"] = setting(
        "all",
        help="word pool for names, rooms, objects and containers: 'train' and 'heldout' are disjoint (train on one, "
        "test on the other); 'all' = both (tomrl.generators.vocabulary)",
    )
    shortcut_neutral: bool = setting(
        False,
        help="draw each story first (one that lets every place the object has been in be asked at the slot's order), "
        "then the gold uniformly among those places from a stratified cycle of its own, then a chain with that "
        "answer: no agent-blind predictor (rules of tomrl.audit.rules, learners) can beat chance on belief orders "
        "(order >= 1; order 0 asks where the object really is, its last place); see tomrl.generators.neutral; "
        "needs one question per story",
    )
    neutral_nesting_share: float = setting(
        0.5,
        help="shortcut_neutral: least share of nesting-required questions (no asked agent believes the gold by "
        "itself; tomrl.world.partial) per order >= 2, where the story kinds allow it (Hi-ToM: more than one chapter "
        "or deception); 0 = do not ask for them",
    )
    adversarial_filter: bool = setting(
        False,
        help="draw a pool of adversarial_pool x n questions and keep n of those an agent-blind learner cannot predict "
        "(AFLite, Le Bras et al. 2020: tomrl.audit.learner.adversarial_filter, run on each order (ToMi: question type "
        "and asked agent) apart, seeded with seed); the kept n are balanced over orders as the plan deals them, the "
        "first survivors of each in the pool's order; order-0 questions are not filtered (the story order fixes "
        "their answer); labels are unchanged, splits assigned after; see tomrl.generators.adversarial. Hi-ToM and "
        "ToMi plain generation, one question per story (stories null), not pairs or agent_swap. With "
        "shortcut_neutral it is allowed but not advised: the neutral generator already makes the gold uniform "
        "given the story, so filtering its output can only add a dependence (questions are removed because a "
        "learner got them right); the shipped neutral configs do not use it",
    )
    adversarial_pool: float = setting(
        4.0,
        help="adversarial_filter: the pool drawn is this many times n (at least 1); the filter removes at most half "
        "of each order, so below 2 an order can run short (an error that names it)",
    )
    # Hi-ToM
    orders: list[int] = setting(default_factory=lambda: [0, 1, 2, 3, 4], help="Hi-ToM question orders to ask (0-4), balanced")
    deception: list[bool] = setting(
        default_factory=lambda: [False, True],
        help="Hi-ToM: stories without (false) and/or with (true) public claims and private tells, balanced",
    )
    lengths: list[int] = setting(default_factory=lambda: [1, 2, 3], help="Hi-ToM story lengths in chapters (1-4), balanced")
    agents: int = setting(5, help="Hi-ToM: agents per story (2-5); all take part in the first chapter")
    last_mover_returns: bool = setting(
        True,
        help="Hi-ToM: in a chapter with all five agents the last mover puts the object back where it started (as "
        "the official generator does; it helps the 'first location' shortcut). false: never back to the start",
    )
    pairs: bool = setting(
        False,
        help="Hi-ToM: emit counterfactual minimal pairs instead, n/2 of them: two stories that differ in one event "
        "(an exit moved across a move, so one agent does or does not witness it; a move made a stay for order 0) so "
        "that the gold answer of the same question flips (meta pair_id, pair_member, edit; with shortcut_neutral no "
        "agent-agnostic rule answers both members right, and belief orders go up to agents - 2; see tomrl.generators.pairs)",
    )
    agent_swap: bool = setting(
        False,
        help="Hi-ToM: emit agent-swap pairs instead, n/2 of them: one story, two questions whose chains differ in one "
        "agent and whose gold answers differ (meta swap_id, swap_member; orders 1-4; see tomrl.generators.pairs)",
    )
    # ToMi
    tomi_question_types: list[TomiQuestionType] = setting(
        default_factory=lambda: ["first_order", "second_order", "reality", "memory"],
        help="ToMi question types to ask, balanced",
    )
    tomi_story_types: list[TomiStoryType] = setting(
        default_factory=lambda: ["true_belief", "false_belief", "second_order_false_belief"],
        help="ToMi story types, balanced",
    )

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"n must be at least 1, got {self.n}")
        if self.stories is not None and not 1 <= self.stories <= self.n:
            raise ValueError(f"stories must be between 1 and n={self.n}, got {self.stories}")
        unknown = sorted(set(self.split_fractions) - set(SPLITS))
        if unknown:
            raise ValueError(f"split_fractions: unknown split '{unknown[0]}' (use {', '.join(SPLITS)})")
        if not self.split_fractions or any(not (math.isfinite(v) and v >= 0) for v in self.split_fractions.values()):
            raise ValueError(f"split_fractions: give at least one split, with finite fractions >= 0, got {self.split_fractions}")
        if abs(sum(self.split_fractions.values()) - 1.0) > 1e-6:
            raise ValueError(f"split_fractions must sum to 1, got {sum(self.split_fractions.values())}")
        if not 0.0 <= self.neutral_nesting_share <= 1.0:
            raise ValueError(f"neutral_nesting_share must be in [0, 1], got {self.neutral_nesting_share}")
        if not 0.0 <= self.distractor_prob < 1.0:
            raise ValueError(f"distractor_prob must be in [0, 1), got {self.distractor_prob}")
        if not self.orders or any(not 0 <= o <= HITOM_MAX_ORDER for o in self.orders):
            raise ValueError(f"orders must be a non-empty list of 0..{HITOM_MAX_ORDER}, got {self.orders}")
        if self.benchmark == "tomi" and list(self.orders) != list(range(HITOM_MAX_ORDER + 1)):
            raise ValueError(
                f"orders={self.orders} applies to Hi-ToM only; ToMi asks orders 0-2 by question type: set tomi_question_types "
                "(first_order = order 1, second_order = 2, reality and memory = 0)"
            )
        if not self.deception:
            raise ValueError("deception must list false and/or true")
        if not self.lengths or any(not 1 <= n <= HITOM_MAX_CHAPTERS for n in self.lengths):
            raise ValueError(f"lengths must be a non-empty list of 1..{HITOM_MAX_CHAPTERS} chapters, got {self.lengths}")
        if not 2 <= self.agents <= 5:
            raise ValueError(f"agents must be between 2 and 5, got {self.agents}")
        if self.benchmark == "hitom" and max(self.orders) > self.agents:
            raise ValueError(f"orders: order {max(self.orders)} needs at least that many agents, agents={self.agents}")
        if not self.tomi_question_types or not self.tomi_story_types:
            raise ValueError("tomi_question_types and tomi_story_types must not be empty")
        if self.shortcut_neutral and self.stories not in (None, self.n):
            raise ValueError("shortcut_neutral needs one question per story: leave stories null")
        if not (math.isfinite(self.adversarial_pool) and self.adversarial_pool >= 1.0):
            raise ValueError(f"adversarial_pool must be at least 1 (the pool is adversarial_pool x n), got {self.adversarial_pool}")
        if self.adversarial_filter and (self.pairs or self.agent_swap):
            kind = "pairs" if self.pairs else "agent_swap"
            raise ValueError(f"adversarial_filter: {kind} come in contrast pairs, which dropping single questions would break; "
                             "use one or the other")
        if self.adversarial_filter and self.stories is not None:
            raise ValueError("adversarial_filter keeps single questions, one per story: leave stories null")
        per_story = -(-self.n // (self.stories or self.n))  # most questions one story is asked
        if self.benchmark == "hitom":
            repeats = -(-per_story // len(self.orders))  # most questions of one order per story
            fewest = min(math.perm(self.agents, order) for order in self.orders)
            if repeats > fewest:
                raise ValueError(
                    f"stories: {self.stories} stories are too few for n={self.n} questions of orders {self.orders}: "
                    f"a story would need {repeats} distinct questions of one order but has only {fewest}"
                )
        else:
            slots = 2 * sum(t in self.tomi_question_types for t in ("first_order", "second_order"))
            slots += sum(t in self.tomi_question_types for t in ("reality", "memory"))
            if per_story > slots:
                raise ValueError(
                    f"stories: {self.stories} stories are too few for n={self.n} questions: a ToMi story has only "
                    f"{slots} distinct questions of types {self.tomi_question_types}"
                )
        if self.pairs or self.agent_swap:
            kind = "pairs" if self.pairs else "agent_swap"
            if self.pairs and self.agent_swap:
                raise ValueError("pairs and agent_swap: choose one (each example belongs to one pair)")
            if self.benchmark != "hitom":
                raise ValueError(f"{kind}: Hi-ToM stories only, got benchmark={self.benchmark}")
            if self.n % 2:
                raise ValueError(f"{kind}: n counts examples, two per pair, so it must be even, got {self.n}")
            if self.stories is not None:
                raise ValueError(f"{kind}: every pair has its own stories; leave stories null")
            if self.agent_swap and 0 in self.orders:
                raise ValueError("agent_swap: order 0 questions ask no agent; use orders 1-4")
            if self.agent_swap and max(self.orders) >= self.agents:
                raise ValueError(f"agent_swap: an order-{max(self.orders)} chain needs another agent to swap in, agents={self.agents}")
            too_high = [order for order in self.orders if order >= 1 and order > self.agents - NEUTRAL_PAIR_SPARE_AGENTS]
            if self.pairs and self.shortcut_neutral and too_high:
                raise ValueError(
                    f"pairs with shortcut_neutral: order {too_high[0]} with agents={self.agents} cannot be neutral; a belief "
                    f"order needs at least order + {NEUTRAL_PAIR_SPARE_AGENTS} agents (a chain that leaves out one agent "
                    "or none lets an agent-blind learner get both members of about 2-3 times the pair chance, or has no "
                    "pair at all; tomrl.generators.pairs, 'Limits'): ask orders up to "
                    f"{self.agents - NEUTRAL_PAIR_SPARE_AGENTS}, or agent_swap=true (neutral at every order)"
                )
        for name in ("orders", "deception", "lengths", "tomi_question_types", "tomi_story_types"):
            values = getattr(self, name)
            if len(set(values)) != len(values):
                raise ValueError(f"{name} lists a value twice: {values}")
