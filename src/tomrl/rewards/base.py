"""The parts every tomrl reward shares: the per-sample result, the TRL-callable base class, and
reading completions (plain strings or TRL's conversational messages).

Rewards themselves and their registry live in :mod:`tomrl.rewards.functions`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from tomrl.rewards.answer import DEFAULT_PREFILL


@dataclass(frozen=True)
class RewardResult:
    """One completion's reward with what it was made of, for per-sample logs.

    ``score`` is None only where the reward does not apply to the sample (the fidelity reward
    on a story it cannot parse); TRL turns None into NaN and ignores it.
    """

    reward: str
    score: float | None
    format_ok: bool
    correct: bool
    extracted: str | None
    components: dict[str, float] = field(default_factory=dict)
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ----------------------------------------------------------------------------- inputs


def completion_text(completion: Any) -> str:
    """The generated text of one completion: a string, or TRL's conversational list of messages."""
    if isinstance(completion, str):
        return completion
    if completion is None:
        return ""
    if isinstance(completion, dict):
        return _message_text(completion)
    if isinstance(completion, (list, tuple)):
        return "".join(_message_text(message) for message in completion)
    return str(completion)


def _message_text(message: Any) -> str:
    if isinstance(message, str):
        return message
    if not isinstance(message, dict):
        return "" if message is None else str(message)
    content = message.get("content")
    if isinstance(content, list):  # multimodal-style content parts
        return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)
    return "" if content is None else str(content)


def _column(kwargs: dict, name: str, count: int) -> list | None:
    values = kwargs.get(name)
    if values is None:
        return None
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        return [values] * count
    if len(values) != count:
        raise ValueError(f"column '{name}' has {len(values)} values for {count} completions")
    return list(values)


# ----------------------------------------------------------------------------- reward classes


class Reward:
    """Base for tomrl rewards: TRL-callable, with :meth:`details` and :meth:`score`."""

    name: str = "reward"
    needs: tuple[str, ...] = ("answer",)  # dataset columns the reward must have
    optional: tuple[str, ...] = ("prefill",)  # dataset columns it reads where present
    correct_means: str = "correct"  # what RewardResult.correct says, as summaries name it

    def __init__(self, prefill: str = DEFAULT_PREFILL):
        self.prefill = prefill
        self.__name__ = self.name  # TRL names a reward function by its __name__

    def score(self, completion: Any, answer: Any = None, prefill: str | None = None, **columns: Any) -> RewardResult:
        raise NotImplementedError

    def details(self, prompts: Sequence | None = None, completions: Sequence | None = None, **kwargs: Any) -> list[RewardResult]:
        """One :class:`RewardResult` per completion (same arguments as calling the reward)."""
        completions = list(completions or [])
        count = len(completions)
        columns = {}
        for name in (*self.needs, *self.optional):
            values = _column(kwargs, name, count)
            if values is None and name in self.needs:
                raise ValueError(f"reward '{self.name}' needs the dataset column '{name}'")
            if values is not None:
                columns[name] = values
        results = []
        for index, completion in enumerate(completions):
            row = {name: values[index] for name, values in columns.items()}
            prefill = row.pop("prefill", None)
            results.append(self.score(completion, prefill=prefill, **row))
        return results

    def __call__(self, prompts: Sequence | None = None, completions: Sequence | None = None, answer: Sequence | None = None, **kwargs: Any) -> list[float | None]:
        results = self.details(prompts, completions, answer=answer, **kwargs)
        _log_to_trainer(self.name, results, kwargs.get("log_extra"), kwargs.get("log_metric"))
        return [result.score for result in results]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(prefill={self.prefill!r})"


def _log_to_trainer(name: str, results: list[RewardResult], log_extra: Any, log_metric: Any) -> None:
    if not results:
        return
    if callable(log_extra):
        log_extra(f"{name}/format_ok", [r.format_ok for r in results])
        log_extra(f"{name}/correct", [r.correct for r in results])
        log_extra(f"{name}/extracted", [r.extracted for r in results])
    if callable(log_metric):
        log_metric(f"{name}/format_ok_rate", sum(r.format_ok for r in results) / len(results))
        log_metric(f"{name}/correct_rate", sum(r.correct for r in results) / len(results))
