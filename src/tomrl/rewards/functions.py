"""Reward functions with TRL's signature, their registry, and per-sample details for logging.

    from tomrl.rewards.functions import REWARDS, make_reward, score_one
    trainer = GRPOTrainer(..., reward_funcs=[REWARDS["strict"]])           # TRL calls it per batch
    REWARDS["strict"](prompts, completions, answer=["green_drawer", ...])   # -> [3.0, -1.0, ...]
    REWARDS["strict"].details(prompts, completions, answer=[...])          # -> [RewardResult, ...]
    score_one("paper", "…</think><answer>toolbox</answer>", "box")        # -> RewardResult(score=3.0, …)
    make_reward("strict", prefill="")                                      # for prompts without a prefill

or from the shell: ``tomrl reward score --reward strict --input completions.jsonl --out scored.jsonl``.

Rewards (see :mod:`tomrl.rewards.answer` for what "format" and "correct" mean per scheme):

============  ========================  ==========================================  ==============
name          answer scheme             score                                       totals
============  ========================  ==========================================  ==============
``strict``    strict (the default)      format ±1, answer ±2; format failure → −2   3, −1, −3
``paper``     Paper A training          format ±1, answer ±2; format failure → −2   3, −1, −3
``paper_b``   Paper B                   0.1 × format ok + 1.0 × correct             0, 0.1, 1, 1.1
``fidelity``  belief statements         share of true statements − penalty × share  −1 … 1, or None
                                        of false ones (:mod:`tomrl.rewards.fidelity`)
============  ========================  ==========================================  ==============

``strict`` keeps Paper A's scale on purpose: a run with ``strict`` and one with ``paper`` differ
only in what counts as well-formed and correct, not in the size of the signal.

Every reward is a callable ``f(prompts, completions, answer=None, **columns) -> list[float | None]``
(TRL passes the dataset's other columns as keyword lists). ``completions`` may be strings or TRL's
conversational form (a list of ``{"role", "content"}`` messages per completion). A completion is
the text generated *after* the prompt; the prompt's prefill (``"<think>"`` for Paper A prompts) is
given when the reward is made (``make_reward(name, prefill=…)``) or per row by a dataset column
``prefill``. When TRL hands the reward its ``log_extra`` / ``log_metric`` hooks, the reward adds
``<name>/format_ok``, ``<name>/correct`` and ``<name>/extracted`` columns to the completions table
and their batch rates to the metrics.
"""

from __future__ import annotations

from typing import Any, Callable

from tomrl.rewards.answer import DEFAULT_PREFILL, AnswerCheck, Scheme, check_answer
from tomrl.rewards.base import Reward, RewardResult, completion_text
from tomrl.rewards.fidelity import FidelityReward

__all__ = ["REWARDS", "REWARD_NAMES", "AnswerReward", "FidelityReward", "Reward", "RewardResult", "completion_text", "make_reward", "score_one"]


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

    def __init__(self, name: str, scheme: Scheme, rule: Callable[[AnswerCheck], dict[str, float]], prefill: str = DEFAULT_PREFILL):
        self.name, self.scheme, self.rule = name, scheme, rule
        super().__init__(prefill)

    def score(self, completion: Any, answer: Any = None, prefill: str | None = None, **columns: Any) -> RewardResult:
        prefill = self.prefill if prefill is None else prefill
        gold = "" if answer is None else str(answer)
        check = check_answer(completion_text(completion), gold, self.scheme, prefill=prefill)
        components = self.rule(check)
        return RewardResult(
            reward=self.name,
            score=float(sum(components.values())),
            format_ok=check.format_ok,
            correct=check.correct,
            extracted=check.extracted,
            components=components,
            reason=check.reason,
        )

    def __repr__(self) -> str:
        return f"AnswerReward(name={self.name!r}, scheme={self.scheme!r}, prefill={self.prefill!r})"

    def __reduce__(self):  # picklable for multi-process data loading
        return (AnswerReward, (self.name, self.scheme, self.rule, self.prefill))


# ----------------------------------------------------------------------------- registry

REWARD_NAMES: tuple[str, ...] = ("strict", "paper", "paper_b", "fidelity")


def make_reward(name: str, prefill: str = DEFAULT_PREFILL, **options: Any) -> Reward:
    """A fresh reward ``name`` for prompts that end with ``prefill`` (``""`` when they have none).

    ``options`` go to the fidelity reward (``timing``, ``contradiction_penalty``, ``semantics``).
    """
    if name == "strict":
        reward: Reward = AnswerReward("strict", "strict", paper_a_score, prefill)
    elif name == "paper":
        reward = AnswerReward("paper", "paper", paper_a_score, prefill)
    elif name == "paper_b":
        reward = AnswerReward("paper_b", "paper_b", paper_b_score, prefill)
    elif name == "fidelity":
        return FidelityReward(prefill=prefill, **options)
    else:
        raise KeyError(f"unknown reward {name!r}; known: {', '.join(REWARD_NAMES)}")
    if options:
        raise TypeError(f"reward {name!r} takes no options, got {', '.join(options)}")
    return reward


REWARDS: dict[str, Reward] = {name: make_reward(name) for name in REWARD_NAMES}


def score_one(reward_name: str, completion: Any, answer: Any = None, prefill: str = DEFAULT_PREFILL, **columns: Any) -> RewardResult:
    """Score one completion with reward ``reward_name`` (columns: ``story``, ``source`` … where needed)."""
    if reward_name not in REWARDS:
        raise KeyError(f"unknown reward {reward_name!r}; known: {', '.join(REWARD_NAMES)}")
    return REWARDS[reward_name].score(completion, answer=answer, prefill=prefill, **columns)
