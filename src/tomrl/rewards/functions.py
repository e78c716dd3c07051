"""Reward functions with TRL's signature, their registry, and per-sample details for logging.

    from tomrl.rewards.functions import make_reward, score_one
    strict = make_reward("strict")                                    # make_reward("strict", prefill="") for no prefill
    trainer = GRPOTrainer(..., reward_funcs=[strict])                  # TRL calls it per batch
    strict(prompts, completions, answer=["green_drawer", ...])         # -> [3.0, -1.0, ...]
    strict.details(prompts, completions, answer=[...])                 # -> [RewardResult, ...]
    score_one("paper", "…</think><answer>toolbox</answer>", "box")    # -> RewardResult(score=3.0, …)
    make_reward("fidelity", timing="final")                            # options: checked against FidelityOptions
    print(reward_options_help())                                       # every reward option with its type, default and help

or from the shell: ``tomrl reward score --reward strict --input completions.jsonl --out scored.jsonl``.

``REWARDS`` maps each name to its factory, a line of help and its options dataclass: the choices,
``--help`` and checks of ``TrainConfig.rewards`` / ``reward_options`` and ``tomrl reward score``
(``--option KEY=VALUE``) come from it; the options' help is written once, in their dataclass. A new
reward is a :class:`Reward` subclass (``name``, ``needs``, ``score``) and a line
``register_reward(name, RewardClass, help=…, options=…)`` (docs/rewards.md: the rewards).

Every reward is TRL-callable, ``f(prompts, completions, answer=None, **columns)``, with the
prompt's prefill given to ``make_reward`` or per row by a ``prefill`` column (:class:`Reward`).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, fields
from functools import partial
from typing import Any, Callable

from tomrl.config import ConfigError, config_from_dict, describe
from tomrl.rewards.answer import DEFAULT_PREFILL, AnswerCheck, Scheme, check_answer, unaware_names
from tomrl.rewards.base import Reward, RewardResult, completion_text
from tomrl.rewards.fidelity import FidelityOptions, FidelityReward

__all__ = ["REWARDS", "AnswerReward", "FidelityReward", "Reward", "RewardResult", "completion_text", "make_reward", "register_reward",
           "reward_options_help", "score_one"]


# ----------------------------------------------------------------------------- scoring rules


def paper_a_score(check: AnswerCheck) -> dict[str, float]:
    """Paper A's components: format +1 / −1; answer +2 / −2 (−2 as well when the format fails)."""
    format_score = 1.0 if check.format_ok else -1.0
    answer_score = 2.0 if (check.format_ok and check.correct) else -2.0
    return {"format": format_score, "answer": answer_score}


def paper_b_score(check: AnswerCheck) -> dict[str, float]:
    """Paper B's components: format 0.1 when well-formed, correctness 1.0 when right (independent)."""
    return {"format": 0.1 if check.format_ok else 0.0, "correctness": 1.0 if check.correct else 0.0}


class AnswerReward(Reward):
    """A reward made from an answer scheme and a rule that turns the check into components."""

    optional = ("prefill", "question_type")  # question_type: list questions are sets, math answers numbers (as in evaluation)

    def __init__(self, name: str, scheme: Scheme, rule: Callable[[AnswerCheck], dict[str, float]], prefill: str = DEFAULT_PREFILL):
        self.name, self.scheme, self.rule = name, scheme, rule
        super().__init__(prefill)

    def score(self, completion: Any, answer: Any = None, prefill: str | None = None, question_type: str | None = None, **columns: Any) -> RewardResult:
        prefill = self.prefill if prefill is None else prefill
        gold = "" if answer is None else str(answer)
        # The training rows carry meta as JSON (tomrl.training.run.dataset_row): FANToM list questions' unaware names.
        check = check_answer(completion_text(completion), gold, self.scheme, prefill=prefill, question_type=question_type,
                             unaware=unaware_names(columns.get("meta")))
        components = self.rule(check)
        return RewardResult(reward=self.name, score=float(sum(components.values())), format_ok=check.format_ok, correct=check.correct,
                            extracted=check.extracted, components=components, reason=check.reason)

    def __repr__(self) -> str:
        return f"AnswerReward(name={self.name!r}, scheme={self.scheme!r}, prefill={self.prefill!r})"


# ----------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class RewardEntry:
    """``make(prefill=…[, options=<options dataclass>]) -> Reward``, a line of help, the options dataclass or None."""

    name: str
    make: Callable[..., Reward]
    help: str
    options: type | None = None


REWARDS: dict[str, RewardEntry] = {}


def register_reward(name: str, make: Callable[..., Reward], *, help: str, options: type | None = None) -> RewardEntry:
    """Register reward ``name``; a second registration of a name is an error (it would change what configs run)."""
    if name in REWARDS:
        raise ValueError(f"reward {name!r} is already registered")
    REWARDS[name] = RewardEntry(name, make, help, options)
    return REWARDS[name]


def registered_reward(name: str) -> str:
    """``name``, if a reward is registered under it (the validator of ``TrainConfig.rewards``)."""
    if name not in REWARDS:
        raise ValueError(f"unknown reward {name!r}; known: {', '.join(REWARDS)}")
    return name


def rewards_help() -> str:
    """The registered rewards with their help and options, for ``--help`` texts."""
    options = {e.name: f"; options: {', '.join(f.name for f in fields(e.options))}" for e in REWARDS.values() if e.options}
    return "; ".join(f"{e.name} ({e.help}{options.get(e.name, '')})" for e in REWARDS.values())


def reward_options_help(name: str | None = None) -> str:
    """Every option of reward ``name`` (or of every reward that takes options), one per line:
    ``NAME.OPTION [type] = default: help`` (``--help`` texts, ``tomrl reward score --help``, error messages)."""
    lines = []
    for entry in REWARDS.values():
        if entry.options is not None and name in (None, entry.name):
            lines += [f"{entry.name}.{key} [{type_name}] = {default}: {help_text}" for key, type_name, default, help_text in describe(entry.options)]
    return "\n".join(lines)


def make_reward(name: str, prefill: str = DEFAULT_PREFILL, **options: Any) -> Reward:
    """A fresh reward ``name`` for prompts that end with ``prefill`` (``""`` for none); ``options`` become its
    options dataclass (an unknown key, a wrong type or an impossible value is a ConfigError naming the reward,
    the option and what it accepts)."""
    entry = REWARDS[registered_reward(name)]
    if entry.options is None:
        if options:
            raise TypeError(f"reward {name!r} takes no options, got {', '.join(options)}")
        return entry.make(prefill=prefill)
    known = [f.name for f in fields(entry.options)]
    for key in options:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"options of reward {name!r}: unknown key {key!r}{hint}; its options:\n{reward_options_help(name)}")
    return entry.make(prefill=prefill, options=config_from_dict(entry.options, options, f"options of reward {name!r}"))


def score_one(reward_name: str, completion: Any, answer: Any = None, prefill: str = DEFAULT_PREFILL, **columns: Any) -> RewardResult:
    """Score one completion with reward ``reward_name`` (columns: ``story``, ``source`` … where needed)."""
    return make_reward(reward_name, prefill=prefill).score(completion, answer=answer, **columns)


# strict keeps Paper A's scale on purpose: a run with strict and one with paper differ only in what
# counts as well-formed and correct (tomrl.rewards.answer), not in the size of the signal.
register_reward("strict", partial(AnswerReward, "strict", "strict", paper_a_score), help="strict scheme; format ±1, answer ±2 (−2 on a format failure): 3, −1, −3")
register_reward("paper", partial(AnswerReward, "paper", "paper", paper_a_score), help="Paper A's training reward, same scale: 3, −1, −3")
register_reward("paper_b", partial(AnswerReward, "paper_b", "paper_b", paper_b_score), help="Paper B's: 0.1 × format ok + 1.0 × correct")
register_reward("fidelity", FidelityReward, options=FidelityOptions,
                help="(true − penalty × false) / checkable belief statements in <think>, −1 … 1, None where it does not apply; rows need story, source")
