"""RL algorithms by name: the choices of ``TrainConfig.algorithm`` (its ``--help`` and checks come from here).

An algorithm is an advantage function ``f(batch) -> Tensor`` (``batch``: :class:`tomrl.training.advantages.
AdvantageInputs`), one advantage per completion (B,) or per token (B, T), put in place of the group-normalised
ones TRL computed (None keeps TRL's: ``grpo``), and ``kl_in_reward``: where ``kl_coef`` × KL goes unless the
config says otherwise, into the rewards the function shapes (``batch.kl_coef`` is then ``kl_coef`` and the loss
has no KL term) or into TRL's loss (``batch.kl_coef`` is 0). A function may be given as ``"module:function"``,
imported on first use, so that loading a config imports no torch. Adding one (docs: "Extending tomrl"):

    register_algorithm("sign", sign_advantages, kl_in_reward=False, help="the sign of each reward against its group's mean")
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Algorithm:
    name: str
    advantages: Callable[[Any], Any] | str | None
    kl_in_reward: bool
    help: str
    verl_estimator: str | None = None  # veRL's algorithm.adv_estimator (tomrl export verl); None: not exportable

    def advantage_function(self) -> Callable[[Any], Any] | None:
        if isinstance(self.advantages, str):
            module, function = self.advantages.split(":")
            return getattr(importlib.import_module(module), function)
        return self.advantages


ALGORITHMS: dict[str, Algorithm] = {}


def register_algorithm(name: str, advantages: Callable | str | None, *, kl_in_reward: bool, help: str, verl_estimator: str | None = None) -> Algorithm:
    """Register algorithm ``name``; a second registration of a name is an error (it would change what configs run)."""
    if name in ALGORITHMS:
        raise ValueError(f"algorithm {name!r} is already registered")
    if kl_in_reward and advantages is None:
        raise ValueError(f"algorithm {name!r}: the KL can go into the rewards only where the algorithm computes advantages")
    ALGORITHMS[name] = Algorithm(name, advantages, kl_in_reward, help, verl_estimator)
    return ALGORITHMS[name]


def registered_algorithm(name: str) -> str:
    """``name``, if an algorithm is registered under it (the validator of ``TrainConfig.algorithm``)."""
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; known: {', '.join(ALGORITHMS)}")
    return name


def algorithms_help() -> str:
    return "; ".join(f"{a.name}: {a.help} (KL in the {'rewards' if a.kl_in_reward else 'loss'})" for a in ALGORITHMS.values())


register_algorithm("grpo", None, kl_in_reward=False, verl_estimator="grpo", help="TRL's group-normalised advantages (Paper A)")
register_algorithm("reinforce_pp", "tomrl.training.advantages:reinforce_pp_advantages", kl_in_reward=True, verl_estimator="reinforce_plus_plus",
                   help="REINFORCE++ as in OpenRLHF: token rewards, returns whitened over the batch, no critic (Paper B)")
register_algorithm("reinforce_pp_baseline", "tomrl.training.advantages:reinforce_pp_baseline_advantages", kl_in_reward=False,
                   verl_estimator="reinforce_plus_plus_baseline", help="group-mean subtraction, then as reinforce_pp")
