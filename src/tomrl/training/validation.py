"""Validation during training: answer held-out questions with the live policy, score, split by order.

The answers are generated with ``model.generate`` (greedy by default) until EOS or the token
budget, as the papers do (Paper A's scoring reads the *last* answer tag; the strict scheme fails a
completion that goes on after ``</answer>``); with ``stop_at_answer`` (a speed option of CPU demos
and smoke runs) they end right after the first ``</answer>``. They are scored by the shared checker (:func:`tomrl.rewards.answer.check_answer`), so
"correct" means the same here as in ``tomrl eval``. Every accuracy carries its 95 % Wilson
interval and n.

    result = validate(model, tokenizer, examples, prompts, settings, prefill="<think>")
    result.accuracy.format()            # "41.7 % [33.2, 50.7] (n=120)"
    result.by_order[2].format()

Sampled answers (``eval.temperature > 0``) draw from one generator per question, seeded from the
validation's seed (the run seed plus the step) and the example id
(:func:`tomrl.generation.base.request_seed`), never from the global random state: validating (or
not) never changes the random numbers the training run draws afterwards, and a question's answer
does not depend on the batch, the number of processes or a resume.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from tomrl.generation.base import Sampling, cut_completion, eos_token_ids, generate_sampling_kwargs, left_padded, request_seed
from tomrl.generation.slots import SlotGenerator, SlotModel, slot_path_supported
from tomrl.rewards.answer import check_answer, unaware_names
from tomrl.schema import Example
from tomrl.stats import Accuracy, accuracy

STOP = "</answer>"


@dataclass
class ValidationResult:
    accuracy: Accuracy
    by_order: dict[int | None, Accuracy]
    format_rate: float
    mean_completion_tokens: float
    seconds: float
    scheme: str
    rows: list[dict] = field(default_factory=list)  # per example: id, order, completion, extracted, correct

    def to_dict(self) -> dict:
        return {
            "accuracy": self.accuracy.to_dict(),
            "by_order": {str(k): v.to_dict() for k, v in self.by_order.items()},
            "format_rate": self.format_rate,
            "mean_completion_tokens": self.mean_completion_tokens,
            "seconds": self.seconds,
            "scheme": self.scheme,
        }

    def summary(self) -> str:
        orders = ", ".join(f"order {k}: {100 * v.value:.1f} % (n={v.n})" for k, v in sorted(self.by_order.items(), key=_order_key))
        return f"accuracy {self.accuracy.format()}; {orders}; format {100 * self.format_rate:.1f} %"


def _order_key(item):
    return -1 if item[0] is None else item[0]


def generate_completions(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    max_new_tokens: int,
    temperature: float = 0.0,
    top_p: float = 1.0,
    batch_size: int = 16,
    seed: int = 0,
    progress: Any = None,
    fast_dtype: Any = None,
    stop_at_answer: bool = False,
    keys: Sequence[Any] | None = None,
) -> list[tuple[str, int]]:
    """``(text, generated_tokens)`` per prompt, in prompt order; each ends at EOS or the token budget
    (with ``stop_at_answer``: right after its first ``</answer>``, if that comes first).

    ``keys`` (the example ids; default: the prompts' positions) seed each prompt's own generator
    with ``request_seed(seed, "validation", key)``, so a sampled answer depends on its question only.

    Llama/Qwen models use the evaluation engine's continuous-batching decoder
    (:class:`tomrl.generation.slots.SlotGenerator`, what ``tomrl eval`` runs, several times faster than
    ``model.generate`` on a CPU), on a copy of the weights in ``fast_dtype`` when given (bf16 on
    CPUs that compute it natively); other architectures use ``model.generate``.
    """
    import torch

    stop = STOP if stop_at_answer else None
    keys = list(keys) if keys is not None else list(range(len(prompts)))
    if len(keys) != len(prompts):
        raise ValueError(f"{len(keys)} keys for {len(prompts)} prompts")
    sampling = Sampling(
        temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, stop=(stop,) if stop else (),
        seeds=tuple(request_seed(seed, "validation", key) for key in keys),
    )
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    try:
        # Sampling draws from the prompts' own generators; the fork guards the run's random state all the same.
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), torch.inference_mode():
            if slot_path_supported(model):
                return _generate_with_slots(model, tokenizer, prompts, sampling, batch_size, progress, fast_dtype)
            return _generate_with_transformers(model, tokenizer, prompts, sampling, batch_size, progress)
    finally:
        if was_training:
            model.train()


def _generate_with_slots(model, tokenizer, prompts, sampling: Sampling, batch_size, progress, fast_dtype):
    import copy

    source = model
    if fast_dtype is not None and next(model.parameters()).dtype != fast_dtype:
        source = copy.deepcopy(model).to(fast_dtype)
    generator = SlotGenerator(SlotModel(source), tokenizer, eos_token_ids(model, tokenizer), batch_size)
    token_lists = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    results: list[tuple[str, int] | None] = [None] * len(prompts)
    for done in generator.run(token_lists, sampling):
        results[done.index] = (done.text, done.tokens)
        if progress is not None:
            progress(1)
    return [r for r in results if r is not None]


def _generate_with_transformers(model, tokenizer, prompts, sampling: Sampling, batch_size, progress):
    stop = sampling.stop[0] if sampling.stop else None
    device = next(model.parameters()).device
    eos_ids = eos_token_ids(model, tokenizer)
    token_lists = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    order = sorted(range(len(prompts)), key=lambda i: -len(token_lists[i]))  # similar lengths per batch
    results: list[tuple[str, int] | None] = [None] * len(prompts)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    stopping = {"stop_strings": [stop], "tokenizer": tokenizer} if stop else {}
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        input_ids, attention_mask = left_padded([token_lists[i] for i in batch], pad_id)
        width = input_ids.shape[1]
        output = model.generate(
            input_ids=input_ids.to(device),
            attention_mask=attention_mask.to(device),
            max_new_tokens=sampling.max_new_tokens,
            pad_token_id=pad_id,
            eos_token_id=sorted(eos_ids),
            **stopping,
            **generate_sampling_kwargs(sampling, [sampling.seeds[i] for i in batch]),
        )
        for row, index in enumerate(batch):
            ids = cut_completion(output[row, width:].tolist(), eos_ids, tokenizer, stop)
            results[index] = (tokenizer.decode(ids, skip_special_tokens=True), len(ids))
        if progress is not None:
            progress(len(batch))
    return [r for r in results if r is not None]


def score_completions(
    examples: Sequence[Example], completions: Sequence[tuple[str, int]], scheme: str, prefill: str
) -> ValidationResult:
    """Accuracy overall and per order, format rate and per-example rows."""
    rows = []
    for example, (text, tokens) in zip(examples, completions):
        check = check_answer(text, example.answer, scheme, prefill=prefill, question_type=example.question_type,
                             unaware=unaware_names(example.meta))
        rows.append(
            {
                "id": example.id,
                "order": example.order,
                "answer": example.answer,
                "completion": text,
                "completion_tokens": tokens,
                "extracted": check.extracted,
                "format_ok": check.format_ok,
                "correct": check.correct,
            }
        )
    by_order: dict[int | None, list[bool]] = {}
    for row in rows:
        by_order.setdefault(row["order"], []).append(row["correct"])
    n = max(len(rows), 1)
    return ValidationResult(
        accuracy=accuracy([r["correct"] for r in rows]),
        by_order={order: accuracy(values) for order, values in by_order.items()},
        format_rate=sum(r["format_ok"] for r in rows) / n,
        mean_completion_tokens=sum(r["completion_tokens"] for r in rows) / n,
        seconds=0.0,
        scheme=scheme,
        rows=rows,
    )


def validate(
    model: Any,
    tokenizer: Any,
    examples: Sequence[Example],
    prompts: Sequence[str],
    settings: Any,
    prefill: str,
    seed: int = 0,
    progress: Any = None,
    fast_dtype: Any = None,
    stop_at_answer: bool = False,
) -> ValidationResult:
    """Generate and score answers to ``examples`` (``settings``: TrainConfig.eval; ``stop_at_answer``: TrainConfig's)."""
    started = time.perf_counter()
    completions = generate_completions(
        model,
        tokenizer,
        prompts,
        max_new_tokens=settings.max_new_tokens,
        temperature=settings.temperature,
        top_p=settings.top_p,
        batch_size=settings.batch_size,
        seed=seed,
        progress=progress,
        fast_dtype=fast_dtype,
        stop_at_answer=stop_at_answer,
        keys=[example.id for example in examples],
    )
    result = score_completions(examples, completions, settings.scheme, prefill)
    result.seconds = time.perf_counter() - started
    return result


def validate_saved_model(model_path: str, examples: Sequence[Example], cfg: Any) -> ValidationResult:
    """Validate a saved model (e.g. the base model before a warm start) like the training callback does."""
    from tomrl.models import load_model, load_tokenizer
    from tomrl.prompts import render_prompt

    tokenizer = load_tokenizer(model_path)
    model = load_model(model_path, dtype="float32")
    examples = list(examples)[: cfg.eval.max_examples] if cfg.eval.max_examples is not None else list(examples)
    prompts = [render_prompt(e, tokenizer, cfg.prompt) for e in examples]
    return validate(
        model, tokenizer, examples, prompts, cfg.eval, cfg.prompt.resolved_prefill, seed=cfg.seed, fast_dtype=generation_dtype(cfg.precision),
        stop_at_answer=cfg.stop_at_answer,
    )


def generation_dtype(precision: str):
    """The dtype validation decodes in: bf16/fp16 when training in it, else the model's own."""
    import torch

    return {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(precision)
