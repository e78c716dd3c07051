"""veRL reward adapter: ``compute_score(data_source, solution_str, ground_truth, extra_info)`` → tomrl's rewards.

veRL loads this module from the installed tomrl (``reward.custom_reward_function.path=
pkg://tomrl.training.verl_reward``, ``reward.custom_reward_function.name=compute_score``; a file
path works too) and calls it once per response with the columns of the parquet rows that
``tomrl export verl`` wrote. The score comes from :mod:`tomrl.rewards.functions` — the same
reward, answer extractor and matcher as ``tomrl train`` and ``tomrl eval`` — so a veRL run and a
TRL run optimise the same thing.

veRL's environment cannot hold tomrl's dependencies (veRL pins transformers < 5.11, tomrl 5.23),
so tomrl goes there with ``pip install --no-deps``: this module and the reward code it reaches
import nothing beyond the standard library, pydantic and PyYAML (tests/training/test_verl_export.py
checks it), and must stay so.

``extra_info`` (written by the exporter) says which reward (``reward``: paper, strict, paper_b,
fidelity) and which prefill (``prefill``: the text the prompt ended with, which Paper A's
format rule counts) apply, and carries the story and question for the fidelity reward.

    from tomrl.training.verl_reward import compute_score
    compute_score("tomrl-hitom", "…</think><answer>box</answer>", "box", {"reward": "paper", "prefill": "<think>"})

``compute_score_details`` returns veRL's dict form (``score`` plus ``format_ok``, ``correct`` and
the reward's components, which newer veRL versions log per step).
"""

from __future__ import annotations

from typing import Any

DEFAULT_REWARD = "paper"
# Columns of extra_info that reward functions may read (the fidelity reward needs the story).
REWARD_COLUMNS = ("story", "question", "source", "order", "question_type", "id")


def _score(solution_str: str, ground_truth: Any, extra_info: dict | None):
    from tomrl.rewards.functions import score_one

    info = dict(extra_info or {})
    reward = info.get("reward") or DEFAULT_REWARD
    prefill = info.get("prefill")
    columns = {k: info[k] for k in REWARD_COLUMNS if info.get(k) is not None}
    return score_one(reward, solution_str, answer=str(ground_truth), prefill="" if prefill is None else prefill, **columns)


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None, **_: Any) -> float:
    """The tomrl reward of one veRL response (0.0 where the reward does not apply, e.g. fidelity on an unparsable story)."""
    result = _score(solution_str, ground_truth, extra_info)
    return 0.0 if result.score is None else float(result.score)


def compute_score_details(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None, **_: Any) -> dict:
    """veRL's dict form: ``score`` plus per-sample fields veRL logs (format_ok, correct, components)."""
    result = _score(solution_str, ground_truth, extra_info)
    details = {
        "score": 0.0 if result.score is None else float(result.score),
        "format_ok": float(result.format_ok),
        "correct": float(result.correct),
    }
    for name, value in result.components.items():
        details[f"component_{name}"] = float(value)
    return details
