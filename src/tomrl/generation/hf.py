"""Hugging Face transformers engine: fast batched generation on CPU or GPU.

    engine = HFEngine("smollm2-135m")                      # embedded name, hub id or local path
    for done in engine.generate(prompts, Sampling(temperature=0, max_new_tokens=256)):
        ...
    tomrl eval --model smollm2-135m --engine hf --benchmark hitom600 --limit 20

Two generation paths share the same inputs, stopping rules and outputs:

``slots`` (default for Llama, Qwen2 and Qwen3 models)
    tomrl's continuous-batching decoder, :mod:`tomrl.generation.slots` (its docstring says how
    it works and what it was measured against), in bf16 where the device computes it natively
    (``dtype="auto"``), under ``torch.inference_mode``.

``generate`` (any other architecture, or ``mode="generate"``)
    Plain ``model.generate`` on length-sorted, left-padded batches with ``stop_strings``.

Both stop at EOS, the token budget, or right after a ``Sampling.stop`` string (``</answer>``
with ``stop_at_answer``; none by default, as the papers generate to EOS), and report the
generated token ids and their count per completion (per-token log-probabilities: slots path
only). Greedy outputs of the two paths are identical in float32 (tested on tiny Llama, Qwen2
and Qwen3 models, and on the embedded model in the slow tests); in bf16 the two paths round
differently, so near-ties can flip.

Sampling: each prompt draws from its own generator, seeded by ``Sampling.seeds`` (``tomrl eval``
seeds prompt i from the run seed, the benchmark, the question id and the sample index), one draw
per token (:func:`tomrl.generation.base.sample_tokens`). The slot decoder keeps one generator per
slot; the ``generate`` path keeps its batches and replaces ``model.generate``'s sampler with a
logits processor that draws each row from its request's generator
(:class:`tomrl.generation.base.RequestSampler`), which was less code than routing sampled
requests elsewhere. A sampled answer is therefore the same whichever prompts share its batch,
in any batch size or order and in a resumed run, and both paths draw the same tokens from the
same logits.
"""

from __future__ import annotations

from typing import Iterator, Sequence

from tomrl.config import ConfigError
from tomrl.generation.base import Completion, Sampling, cut_at_stop, eos_token_ids, generate_sampling_kwargs, left_padded
from tomrl.generation.slots import SLOT_ARCHITECTURES, SlotGenerator, SlotModel, slot_path_supported


def pick_dtype(dtype: str, device: str):
    """The torch dtype for ``dtype`` ("auto" = bf16 where the device computes it natively)."""
    import torch

    if dtype != "auto":
        return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    if device.startswith("cuda"):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    # On CPUs with AVX512-BF16 or AMX, oneDNN runs bf16 matmuls natively (about 3x faster than
    # float32 for the 135M model on the 2-core EPYC this was tuned on); elsewhere bf16 is
    # emulated and 60-100x slower than float32. `tomrl.models.cpu_runs_bf16_fast` decides from the CPU's features (AVX512-BF16/AMX), never a timing.
    from tomrl.models import cpu_runs_bf16_fast

    return torch.bfloat16 if cpu_runs_bf16_fast()[0] else torch.float32


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class HFEngine:
    """Generate with a transformers causal LM (see the module docstring for the two paths)."""

    name = "hf"
    prompt_kind = "text"

    def __init__(
        self,
        model: str,
        dtype: str = "auto",
        device: str | None = None,
        batch_size: int = 64,
        mode: str = "auto",
        trust_remote_code: bool = False,
        prefix_cache: bool = True,
        threads: int | None = None,
    ):
        import torch

        from tomrl.models import context_length, load_model, load_tokenizer

        if threads is not None:
            torch.set_num_threads(threads)

        if mode not in ("auto", "slots", "generate"):
            raise ValueError(f"mode must be auto, slots or generate, got {mode!r}")
        self.model_name = model
        self.device = device or default_device()
        self.torch_dtype = pick_dtype(dtype, self.device)
        self.batch_size = batch_size
        self.prefix_cache = prefix_cache
        self.tokenizer = load_tokenizer(model, trust_remote_code=trust_remote_code)
        dtype_name = str(self.torch_dtype).removeprefix("torch.")
        self.model = load_model(model, dtype=dtype_name, device=self.device, trust_remote_code=trust_remote_code)
        self.model.eval()
        supported = slot_path_supported(self.model)
        if mode == "slots" and not supported:
            raise ValueError(f"the slots path supports {', '.join(SLOT_ARCHITECTURES)} models; {model} is {self.model.config.model_type}")
        self.mode = "slots" if (mode == "slots" or (mode == "auto" and supported)) else "generate"
        self.eos_ids = eos_token_ids(self.model, self.tokenizer)
        # (length, where it was read) or None: what a Sampling.max_new_tokens is checked against.
        self.context = context_length(self.model.config.to_dict())
        self._slot_model = None
        self._torch = torch

    def describe(self) -> dict:
        return {
            "engine": self.name,
            "model": self.model_name,
            "path": self.mode,
            "dtype": str(self.torch_dtype).removeprefix("torch."),
            "device": self.device,
            "batch_size": self.batch_size,
            "torch_threads": self._torch.get_num_threads(),
        }

    def generate(self, prompts: Sequence[str], sampling: Sampling) -> Iterator[Completion]:
        from tomrl.models import generation_length_problem

        # A budget beyond the model's whole context generated for hours (or forever) past the positions it
        # was trained on; commands check it before any work where the model's config is on disk.
        problem = generation_length_problem(self.model_name, sampling.max_new_tokens, self.context)
        if problem:
            raise ConfigError(f"max_new_tokens: {problem}")
        if not prompts:
            return
        token_lists = [self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        with self._torch.inference_mode():
            if self.mode == "slots":
                if self._slot_model is None:
                    self._slot_model = SlotModel(self.model)
                generator = SlotGenerator(self._slot_model, self.tokenizer, self.eos_ids, self.batch_size, self.prefix_cache)
                yield from generator.run(token_lists, sampling)
            else:
                yield from self._generate_plain(token_lists, sampling)

    def _generate_plain(self, token_lists: list[list[int]], sampling: Sampling) -> Iterator[Completion]:
        """``model.generate`` on left-padded batches of similar length (the fallback path)."""
        order = sorted(range(len(token_lists)), key=lambda i: -len(token_lists[i]))
        pad_id = self.tokenizer.pad_token_id
        seeds = sampling.request_seeds(len(token_lists))
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            ids, mask = left_padded([token_lists[i] for i in batch], pad_id)
            width = ids.shape[1]
            kwargs = dict(max_new_tokens=sampling.max_new_tokens, pad_token_id=pad_id, eos_token_id=sorted(self.eos_ids))
            kwargs.update(generate_sampling_kwargs(sampling, [seeds[i] for i in batch]))
            if sampling.stop:
                kwargs.update(stop_strings=list(sampling.stop), tokenizer=self.tokenizer)
            if sampling.ignore_eos:
                kwargs.update(min_new_tokens=sampling.max_new_tokens)
            output = self.model.generate(input_ids=ids.to(self.device), attention_mask=mask.to(self.device), **kwargs)
            for row, i in enumerate(batch):
                new = output[row, width:].tolist()
                yield _finish(i, new, len(token_lists[i]), self.tokenizer, self.eos_ids, sampling)


def _finish(index: int, new_tokens: list[int], prompt_tokens: int, tokenizer, eos_ids: set[int], sampling: Sampling) -> Completion:
    """Turn generated token ids into a :class:`Completion` (cut at EOS or a stop string)."""
    reason = "length"
    kept = []
    for token in new_tokens:
        kept.append(token)
        if token in eos_ids:
            reason = "eos"
            break
    text, stopped = cut_at_stop(tokenizer.decode(kept, skip_special_tokens=True), sampling.stop)
    if stopped:
        reason = "stop"
        # Count tokens up to the one that completed the stop string: the shortest prefix whose
        # text contains it (containment only grows with the prefix, so bisect).
        low, high = 1, len(kept)
        while low < high:
            middle = (low + high) // 2
            if cut_at_stop(tokenizer.decode(kept[:middle], skip_special_tokens=True), sampling.stop)[1]:
                high = middle
            else:
                low = middle + 1
        kept = kept[:low]
    return Completion(index=index, text=text, tokens=len(kept), prompt_tokens=prompt_tokens, finish_reason=reason, token_ids=kept)
