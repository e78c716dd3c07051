"""Engines by name: ``make_engine(cfg)`` builds the one ``cfg.engine`` names.

Each entry is a factory ``cfg -> Engine`` (``cfg``: :class:`tomrl.evaluation.config.EvalConfig`)
and a description, which ``tomrl eval --help`` shows beside the name (as the help of ``engine``).
The factories import their engine only when called, so this module loads no torch, vLLM or HTTP
code, and no engine module imports this one (no import circle).

Adding an engine is one call, next to the engine's code:

    from tomrl.generation import register_engine

    @register_engine("echo", description="repeats the prompt")
    def make_echo(cfg):
        return EchoEngine(cfg.model)          # any object with Engine's attributes and methods

    make_engine(cfg)                          # with cfg.engine == "echo"

``EvalConfig.engine`` accepts every registered name, so a config built after the registering module
was imported (in a script, a notebook, a test) runs the new engine through the whole evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from tomrl.generation.base import Engine

EngineFactory = Callable[[Any], Engine]


@dataclass(frozen=True)
class EngineEntry:
    """A registered engine: how to build it, and what it is (for ``--help``)."""

    name: str
    factory: EngineFactory
    description: str = ""


ENGINES: dict[str, EngineEntry] = {}


def register_engine(name: str, factory: EngineFactory | None = None, description: str = ""):
    """Register ``factory`` under ``name``; without ``factory``, a decorator that registers the function.

    A second registration of the same name is an error (it would silently change what a config
    that names it runs).
    """

    def add(function: EngineFactory) -> EngineFactory:
        if name in ENGINES:
            raise ValueError(f"engine {name!r} is already registered")
        ENGINES[name] = EngineEntry(name, function, description)
        return function

    return add if factory is None else add(factory)


def engine_names() -> list[str]:
    return sorted(ENGINES)


def engines_help() -> str:
    return ", ".join(f"{e.name} ({e.description})" if e.description else e.name for e in ENGINES.values())


def make_engine(cfg) -> Engine:
    """The engine ``cfg.engine`` names (``cfg``: :class:`tomrl.evaluation.config.EvalConfig`)."""
    entry = ENGINES.get(cfg.engine)
    if entry is None:
        raise ValueError(f"unknown engine {cfg.engine!r}; known engines: {', '.join(engine_names())}")
    return entry.factory(cfg)


@register_engine("hf", description="transformers, CPU or GPU")
def _make_hf(cfg) -> Engine:
    from tomrl.generation.hf import HFEngine

    return HFEngine(
        cfg.model,
        dtype=cfg.dtype,
        device=cfg.device,
        batch_size=cfg.batch_size,
        mode=cfg.hf_mode,
        trust_remote_code=cfg.trust_remote_code,
        threads=cfg.threads,
    )


@register_engine("vllm", description="GPU")
def _make_vllm(cfg) -> Engine:
    from tomrl.generation.vllm import VLLMEngine

    return VLLMEngine(cfg.model, dtype=cfg.dtype, seed=cfg.seed, settings=cfg.vllm, trust_remote_code=cfg.trust_remote_code)


@register_engine("openai", description="HTTP server")
def _make_openai(cfg) -> Engine:
    from tomrl.generation.openai import OpenAIEngine

    return OpenAIEngine(cfg.model, cfg.openai, trust_remote_code=cfg.trust_remote_code)
