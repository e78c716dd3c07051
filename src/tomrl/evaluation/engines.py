"""What every generation engine takes and returns, and how one is chosen by name.

An engine turns chat-templated prompts into completions. Three exist:

- ``hf``     (:mod:`tomrl.evaluation.hf`): Hugging Face transformers on CPU or GPU;
- ``vllm``   (:mod:`tomrl.evaluation.vllm_engine`): vLLM, when installed (GPU);
- ``openai`` (:mod:`tomrl.evaluation.openai_engine`): any OpenAI-compatible HTTP server.

All of them yield :class:`Completion` objects *as they finish* (not necessarily in prompt
order), so the runner can append each one to ``samples.jsonl`` at once and a killed run loses
at most the completions still in flight.

    engine = make_engine(cfg)                       # cfg: tomrl.evaluation.config.EvalConfig
    for done in engine.generate(prompts, Sampling(temperature=0.6, top_p=0.95, max_new_tokens=512)):
        print(done.index, done.text)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Protocol, Sequence

# Paper A's evaluation: vLLM, temperature 0.6, top-p 0.95, one sample (MISSION.md).
PAPER_TEMPERATURE = 0.6
PAPER_TOP_P = 0.95
DEFAULT_STOP = ("</answer>",)


@dataclass(frozen=True)
class Sampling:
    """How to pick tokens: ``temperature == 0`` means greedy (``top_p`` is then unused)."""

    temperature: float = PAPER_TEMPERATURE
    top_p: float = PAPER_TOP_P
    max_new_tokens: int = 1024
    stop: tuple[str, ...] = DEFAULT_STOP  # generation ends right after the first of these strings
    seed: int = 0
    ignore_eos: bool = False  # never pick EOS: every prompt runs to max_new_tokens (throughput benchmarks only)

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass
class Completion:
    """One finished generation for prompt number ``index`` of the request."""

    index: int
    text: str  # the generated text, cut right after a stop string when one ended it
    tokens: int  # generated tokens, the stopping token included
    prompt_tokens: int
    finish_reason: str  # "stop" (stop string), "eos", "length" (token budget) or "error"
    error: str | None = None  # why an API call failed after its retries (finish_reason "error")
    extra: dict = field(default_factory=dict)


class Engine(Protocol):
    """The interface every engine provides.

    ``prompt_kind`` says what ``generate`` takes: ``"text"`` (the chat-templated prompt text,
    prefill included, rendered with the engine's ``tokenizer``) or ``"messages"`` (chat
    messages, which a server templates itself; no prefill can be sent).
    """

    name: str
    model_name: str
    prompt_kind: str  # "text" or "messages"
    tokenizer: Any  # for "text" engines: renders prompts; None for "messages" engines

    def generate(self, prompts: Sequence[Any], sampling: Sampling) -> Iterator[Completion]:
        """Yield one :class:`Completion` per prompt, in any order, as each finishes."""
        ...

    def describe(self) -> dict:
        """What produced the outputs (engine, model, dtype, device …), for results.json."""
        ...


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """``text`` cut right after the earliest stop string in it, and whether one was found."""
    best = -1
    for s in stop:
        at = text.find(s)
        if at >= 0 and (best < 0 or at + len(s) < best):
            best = at + len(s)
    return (text[:best], True) if best >= 0 else (text, False)


def make_engine(cfg) -> "Engine":
    """The engine ``cfg.engine`` names (``cfg``: :class:`tomrl.evaluation.config.EvalConfig`)."""
    if cfg.engine == "hf":
        from tomrl.evaluation.hf import HFEngine

        return HFEngine(
            cfg.model,
            dtype=cfg.dtype,
            device=cfg.device,
            batch_size=cfg.batch_size,
            mode=cfg.hf_mode,
            trust_remote_code=cfg.trust_remote_code,
            threads=cfg.threads,
        )
    if cfg.engine == "vllm":
        from tomrl.evaluation.vllm_engine import VLLMEngine

        return VLLMEngine(cfg.model, dtype=cfg.dtype, seed=cfg.seed, settings=cfg.vllm, trust_remote_code=cfg.trust_remote_code)
    if cfg.engine == "openai":
        from tomrl.evaluation.openai_engine import OpenAIEngine

        return OpenAIEngine(cfg.model, cfg.openai, trust_remote_code=cfg.trust_remote_code)
    raise ValueError(f"unknown engine {cfg.engine!r}")
