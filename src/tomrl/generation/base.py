"""What every generation engine takes and returns, and the token-level helpers they share.

An engine turns chat-templated prompts into completions. Three are registered
(:mod:`tomrl.generation.registry`, which also lets you add your own):

- ``hf``     (:mod:`tomrl.generation.hf`): Hugging Face transformers on CPU or GPU;
- ``vllm``   (:mod:`tomrl.generation.vllm`): vLLM, when installed (GPU);
- ``openai`` (:mod:`tomrl.generation.openai`): any OpenAI-compatible HTTP server.

All of them yield :class:`Completion` objects *as they finish* (not necessarily in prompt
order), so the evaluation runner can append each one to ``samples.jsonl`` at once and a killed
run loses at most the completions still in flight.

    from tomrl.generation import Sampling, make_engine
    engine = make_engine(cfg)                       # cfg: tomrl.evaluation.config.EvalConfig
    for done in engine.generate(prompts, Sampling(temperature=0.6, top_p=0.95, max_new_tokens=512)):
        print(done.index, done.text, done.token_ids)

This module imports no engine and no torch (``tomrl --help`` and the config modules import it),
so every engine module can import it without an import circle.
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
    logprobs: bool = False  # also return each sampled token's log-probability (hf slots path; for RL rollouts)

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
    # The generated ids exactly as sampled, cut where the completion ends (the EOS or the token
    # that completed the stop string included): what an RL loss scores. Empty for engines that
    # only see text (openai).
    token_ids: list[int] = field(default_factory=list)
    # Per generated token: log-softmax of logits / temperature at the sampled token, in float32
    # (plain log-softmax when greedy); only with ``Sampling.logprobs`` on an engine that supports it.
    logprobs: list[float] | None = None


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


def cut_completion(ids: list[int], eos_ids: set[int], tokenizer: Any, stop: str | None) -> list[int]:
    """Keep a generated row up to its first EOS (included) or the end of ``stop``, whichever is first.

    ``model.generate`` pads finished rows; the padding is never part of the completion. The
    shortest prefix whose text contains ``stop`` is found by bisection (containment only grows
    with the prefix), so this costs a handful of decodes per row.
    """
    end = len(ids)
    for index, token in enumerate(ids):
        if token in eos_ids:
            end = index + 1
            break
    ids = ids[:end]
    if stop is None or stop not in tokenizer.decode(ids, skip_special_tokens=False):
        return ids
    low, high = 1, len(ids)
    while low < high:
        middle = (low + high) // 2
        if stop in tokenizer.decode(ids[:middle], skip_special_tokens=False):
            high = middle
        else:
            low = middle + 1
    return ids[:low]


def eos_token_ids(model: Any, tokenizer: Any) -> set[int]:
    """Every id that ends a sequence: the generation config's, the model config's and the tokenizer's.

    Chat models often end a turn with a token (``<|im_end|>``) that only one of the three names.
    """
    ids: set[int] = set()
    for source in (getattr(model, "generation_config", None), getattr(model, "config", None), tokenizer):
        value = getattr(source, "eos_token_id", None)
        if value is None:
            continue
        ids.update(value if isinstance(value, (list, tuple)) else [value])
    return ids


def left_padded(token_lists: Sequence[list[int]], pad_id: int):
    """``(input_ids, attention_mask)`` of ``token_lists`` left-padded to the longest (for ``model.generate``)."""
    import torch

    width = max(len(tokens) for tokens in token_lists)
    ids = torch.full((len(token_lists), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(token_lists), width), dtype=torch.long)
    for row, tokens in enumerate(token_lists):
        ids[row, width - len(tokens) :] = torch.tensor(tokens)
        mask[row, width - len(tokens) :] = 1
    return ids, mask
