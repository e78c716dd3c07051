"""What every generation engine takes and returns, and the token-level helpers they share.

An engine turns chat-templated prompts into completions. Three are registered
(:mod:`tomrl.generation.registry`, which also lets you add your own):

- ``hf``     (:mod:`tomrl.generation.hf`): Hugging Face transformers on CPU or GPU;
- ``vllm``   (:mod:`tomrl.generation.vllm`): vLLM, when installed (GPU);
- ``openai`` (:mod:`tomrl.generation.openai`): any OpenAI-compatible HTTP server.

All of them yield :class:`Completion` objects *as they finish* (not necessarily in prompt
order), so the evaluation runner can append each one to ``samples.jsonl`` at once and a killed
run loses at most the completions still in flight.

Every prompt samples from its own random stream, seeded by ``Sampling.seeds`` (one seed per
prompt; callers derive it with :func:`request_seed` from the run seed and what identifies the
request: question id and sample index, or training step, prompt and sample), so a sampled
answer does not depend on which prompts share its batch, the batch size, the prompt order, or
where an interrupted run was resumed. :func:`sample_tokens` is how the ``hf`` engine and the slot
decoder draw a token from that stream.

    from tomrl.generation import Sampling, make_engine
    engine = make_engine(cfg)                       # cfg: tomrl.evaluation.config.EvalConfig
    for done in engine.generate(prompts, Sampling(temperature=0.6, top_p=0.95, max_new_tokens=512)):
        print(done.index, done.text, done.token_ids)

This module imports no engine and no torch (``tomrl --help`` and the config modules import it),
so every engine module can import it without an import circle.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Iterator, Protocol, Sequence

# Paper A's evaluation: vLLM, temperature 0.6, top-p 0.95, one sample (MISSION.md).
PAPER_TEMPERATURE = 0.6
PAPER_TOP_P = 0.95
DEFAULT_STOP = ("</answer>",)
TOP_P_CANDIDATES = 64  # tokens looked at before falling back to a full sort for top-p


def request_seed(seed: int, *key: object) -> int:
    """The sampling seed of one request: a hash of the run's ``seed`` and what identifies the
    request (e.g. benchmark, question id, sample index), the same in every process and Python
    version (``hash()`` is salted per process); 63 bits, which every engine's seed takes."""
    text = "\x1f".join(str(part) for part in (seed, *key))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


@dataclass(frozen=True)
class Sampling:
    """How to pick tokens: ``temperature == 0`` means greedy (``top_p`` is then unused)."""

    temperature: float = PAPER_TEMPERATURE
    top_p: float = PAPER_TOP_P
    max_new_tokens: int = 1024
    stop: tuple[str, ...] = DEFAULT_STOP  # generation ends right after the first of these strings
    seed: int = 0  # without ``seeds``, prompt i samples from the stream seeded with seed + i
    # One seed per prompt (see request_seed): prompt i's tokens are drawn from a stream seeded with
    # seeds[i] alone, so its answer is the same in any batch, order or resumed run.
    seeds: tuple[int, ...] | None = None
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

    def request_seeds(self, count: int) -> list[int]:
        """The seed of each of ``count`` prompts: ``seeds``, or ``seed + i`` without them."""
        if self.seeds is None:
            return [self.seed + i for i in range(count)]
        if len(self.seeds) != count:
            raise ValueError(f"Sampling.seeds has {len(self.seeds)} seeds for {count} prompts")
        return list(self.seeds)


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


def request_generators(seeds: Sequence[int]) -> list:
    """One CPU ``torch.Generator`` per request, seeded with its seed (CPU: the draws are the same on any device)."""
    import torch

    return [torch.Generator().manual_seed(seed) for seed in seeds]


def sample_tokens(logits, sampling: Sampling, generators: Sequence[Any]):
    """One token per row of ``logits`` [rows, vocab] as ``sampling`` says; row i draws from ``generators[i]`` alone.

    Temperature, then top-p (vLLM's rule: keep a token while the mass before it is below
    ``top_p``), then one uniform number u from the row's generator picks the token whose
    cumulative mass, in token-id order, first exceeds u times the kept mass (inverse CDF). Each row
    costs its generator exactly one draw per token, whatever the other rows, the batch size or the
    top-p path (the top ``TOP_P_CANDIDATES`` tokens, or a full sort when they hold less than
    ``top_p``) are; token-id order makes near-tied tokens swapping ranks change nothing. A row whose
    generator is None (a free slot, whose token is discarded) draws nothing. Greedy: the argmax.
    """
    import torch

    if sampling.greedy:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits.float() / sampling.temperature, dim=-1)
    weights, index = probs, None  # the weights of the tokens index[i] (None: of every token, by id)
    if sampling.top_p < 1.0:
        top, top_index = probs.topk(min(TOP_P_CANDIDATES, probs.shape[-1]), dim=-1)
        if bool((top.sum(dim=-1) >= sampling.top_p).all()):
            keep = (top.cumsum(dim=-1) - top) < sampling.top_p
            order = torch.where(keep, top_index, probs.shape[-1]).argsort(dim=-1)  # kept tokens by id, the others after
            weights, index = (top * keep).gather(1, order), top_index.gather(1, order)
        else:
            top, top_index = probs.sort(dim=-1, descending=True)
            keep = (top.cumsum(dim=-1) - top) < sampling.top_p
            weights = probs * torch.zeros_like(keep).scatter_(1, top_index, keep)
    # float64: the mass of a long tail of tiny probabilities is not lost to rounding.
    cumulative = weights.double().cumsum(dim=-1)
    total = cumulative[:, -1:]
    uniform = [float(torch.rand((), generator=g)) if g is not None else 0.0 for g in generators]
    threshold = torch.tensor(uniform, dtype=torch.float64, device=logits.device).unsqueeze(1) * total
    threshold = torch.minimum(threshold, torch.nextafter(total, torch.zeros_like(total)))  # never past the last kept token
    choice = torch.searchsorted(cumulative, threshold, right=True)
    return (choice if index is None else index.gather(1, choice)).squeeze(1)


class RequestSampler:
    """A ``model.generate`` logits processor that samples as :func:`sample_tokens` (row i of the
    batch from ``generators[i]``) and leaves the chosen token as the only finite score, so that
    greedy decoding (``do_sample=False``) emits it. :func:`generate_sampling_kwargs` sets it up."""

    def __init__(self, sampling: Sampling, generators: Sequence[Any]):
        self.sampling = sampling
        self.generators = list(generators)

    def __call__(self, input_ids, scores):
        import torch

        tokens = sample_tokens(scores, self.sampling, self.generators)
        return torch.full_like(scores, float("-inf")).scatter_(1, tokens.unsqueeze(1), 0.0)


def generate_sampling_kwargs(sampling: Sampling, seeds: Sequence[int]) -> dict[str, Any]:
    """``model.generate`` arguments that pick tokens as ``sampling`` does, one request (row) per seed."""
    kwargs: dict[str, Any] = dict(do_sample=False, temperature=None, top_p=None, top_k=None)
    if not sampling.greedy:
        from transformers import LogitsProcessorList

        kwargs["logits_processor"] = LogitsProcessorList([RequestSampler(sampling, request_generators(seeds))])
    return kwargs


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
