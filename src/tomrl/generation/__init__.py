"""Text generation: what an engine takes and returns, the engines, and how one is chosen by name.

    from tomrl.generation import HFEngine, Sampling
    for done in HFEngine("smollm2-135m").generate(prompts, Sampling(temperature=0, max_new_tokens=256)):
        done.index, done.text, done.token_ids

Modules: :mod:`~tomrl.generation.base` (Sampling, Completion, the Engine protocol, token
helpers), :mod:`~tomrl.generation.slots` (tomrl's continuous-batching decoder),
:mod:`~tomrl.generation.hf`, :mod:`~tomrl.generation.vllm`, :mod:`~tomrl.generation.openai`
(the engines) and :mod:`~tomrl.generation.registry` (engines by name, ``make_engine``).

Only :mod:`~tomrl.generation.base` is imported with the package; the other names load their
module (and torch) on first use, so ``tomrl --help`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from tomrl.generation.base import (
    DEFAULT_STOP,
    PAPER_TEMPERATURE,
    PAPER_TOP_P,
    Completion,
    Engine,
    Sampling,
    cut_at_stop,
    cut_completion,
    eos_token_ids,
    left_padded,
)

_LAZY = {
    "make_engine": "tomrl.generation.registry",
    "register_engine": "tomrl.generation.registry",
    "SlotModel": "tomrl.generation.slots",
    "SlotGenerator": "tomrl.generation.slots",
    "slot_path_supported": "tomrl.generation.slots",
    "HFEngine": "tomrl.generation.hf",
    "pick_dtype": "tomrl.generation.hf",
    "default_device": "tomrl.generation.hf",
}

if TYPE_CHECKING:
    from tomrl.generation.hf import HFEngine, default_device, pick_dtype
    from tomrl.generation.registry import make_engine, register_engine
    from tomrl.generation.slots import SlotGenerator, SlotModel, slot_path_supported

__all__ = [
    "DEFAULT_STOP",
    "PAPER_TEMPERATURE",
    "PAPER_TOP_P",
    "Completion",
    "Engine",
    "Sampling",
    "cut_at_stop",
    "cut_completion",
    "eos_token_ids",
    "left_padded",
    *_LAZY,
]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tomrl.generation' has no attribute {name!r}")
