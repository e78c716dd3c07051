"""Hidden states for the belief probes: every layer's state at the last prompt token, cached per model.

    from tomrl.analysis.probes_features import model_features
    features = model_features("base", "smollm2-135m", questions, PromptConfig(), Path("out/features-base.npz"))
    features.states          # float32 array (questions, layers + 1, hidden); index 0 = the embeddings

The prompt is built exactly as ``tomrl eval`` builds it for a local model
(:func:`tomrl.prompts.render_prompt`: the model's chat template with the generation prompt, then
the style's prefill, tokenized without added special tokens), so the state read is the one the
model's answer starts from: the last token of the chat-templated prompt *including* the prefill
(with Paper A's prompt, the ``>`` of ``<think>``). One forward pass per question
(``output_hidden_states=True``, float32, no gradient); one at a time, so no padding can shift a
position.

The cache ``features-LABEL.npz`` holds plain numpy arrays only (read with ``allow_pickle=False``):
the states, each question's id and the SHA-256 of its prompt text, and a fingerprint of the model
(its path and the size and modification time of its weight and config files). A rerun reuses
every question whose id and prompt are cached for the same fingerprint, computes only the rest,
and rewrites the file atomically.
"""

from __future__ import annotations

import hashlib
import io
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from tomrl.analysis.probes_labels import ProbeQuestion
from tomrl.io import BadInputError, atomic_open
from tomrl.prompts import PromptConfig

CACHE_VERSION = "1"


@dataclass(frozen=True)
class ModelFeatures:
    label: str
    model: str
    ids: tuple[str, ...]
    states: np.ndarray  # (questions, layers + 1, hidden), float32
    reused: int  # questions read from the cache
    computed: int  # questions run through the model now
    seconds: float  # time spent computing (0 when everything was cached)
    last_token: str  # the token whose states these are, as the tokenizer writes it (the first question's)


def label_slug(label: str) -> str:
    """A label as a file-name part: ``warm start`` → ``warm-start``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-") or "model"


def model_fingerprint(model: str) -> str:
    """The model's path with the size and mtime of its weights and config: a retrained model at the
    same path gets a new fingerprint, so its cached states are not reused."""
    from tomrl.models import resolve_model

    resolved = Path(model)
    if not resolved.is_dir():
        try:
            resolved = Path(resolve_model(model, prepare_if_missing=False))  # an embedded name → its folder
        except RuntimeError:  # an embedded model not prepared yet: loading it will prepare it
            return model
    if not resolved.is_dir():  # a hub id
        return model
    parts = [str(resolved.resolve())]
    for file in sorted(resolved.glob("*.safetensors")) + sorted(resolved.glob("config.json")):
        info = file.stat()
        parts.append(f"{file.name}:{info.st_size}:{info.st_mtime_ns}")
    return "|".join(parts)


def prompt_digest(prompt: str) -> str:
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()


def read_cache(path: Path, fingerprint: str) -> dict[tuple[str, str], np.ndarray]:
    """(id, prompt digest) → states, from ``path`` when it was written for ``fingerprint``; else empty."""
    if not path.exists():
        return {}
    try:
        with np.load(path, allow_pickle=False) as data:
            if str(data["version"]) != CACHE_VERSION or str(data["fingerprint"]) != fingerprint:
                return {}
            states, ids, digests = data["states"], data["ids"], data["prompt_sha256"]
    except (OSError, KeyError, ValueError) as error:
        raise BadInputError(f"{path}: not a feature cache of tomrl analyze probes ({error}); delete it to recompute") from error
    return {(str(i), str(d)): states[row] for row, (i, d) in enumerate(zip(ids, digests))}


def write_cache(path: Path, fingerprint: str, model: str, entries: dict[tuple[str, str], np.ndarray]) -> None:
    keys = sorted(entries)
    buffer = io.BytesIO()
    np.savez(
        buffer,
        version=np.array(CACHE_VERSION),
        fingerprint=np.array(fingerprint),
        model=np.array(model),
        ids=np.array([k[0] for k in keys], dtype=str),
        prompt_sha256=np.array([k[1] for k in keys], dtype=str),
        states=np.stack([entries[k] for k in keys]).astype(np.float32),
    )
    with atomic_open(path, "wb", encoding=None) as handle:
        handle.write(buffer.getvalue())


def model_features(
    label: str,
    model: str,
    questions: Sequence[ProbeQuestion],
    prompt: PromptConfig,
    cache_path: Path,
    advance: Callable[[int], None] = lambda done: None,
    threads: int | None = None,
) -> ModelFeatures:
    """The states of ``questions`` for ``model``, from the cache where it has them; ``advance(k)`` after each
    question; ``threads``: torch's CPU threads (None: its default)."""
    import torch

    from tomrl.models import load_model, load_tokenizer
    from tomrl.prompts import render_prompt

    tokenizer = load_tokenizer(model)  # the prompt is rendered with each model's own chat template
    prompts = [render_prompt(q.example, tokenizer, prompt) for q in questions]
    keys = [(q.example.id, prompt_digest(p)) for q, p in zip(questions, prompts)]
    fingerprint = model_fingerprint(model)
    cached = read_cache(cache_path, fingerprint)
    missing = [i for i, key in enumerate(keys) if key not in cached]
    advance(len(questions) - len(missing))
    seconds = 0.0
    if missing:
        started = time.perf_counter()
        if threads is not None:
            torch.set_num_threads(threads)
        network = load_model(model, dtype="float32")
        network.eval()
        with torch.inference_mode():
            for count, i in enumerate(missing, start=1):
                tokens = tokenizer(prompts[i], add_special_tokens=False, return_tensors="pt")
                output = network(**tokens, output_hidden_states=True, use_cache=False)
                cached[keys[i]] = torch.stack([layer[0, -1] for layer in output.hidden_states]).float().numpy()
                advance(1)
                if count % 25 == 0:  # a long run stopped midway keeps what it computed
                    write_cache(cache_path, fingerprint, model, cached)
        write_cache(cache_path, fingerprint, model, cached)
        seconds = time.perf_counter() - started
        del network
    states = np.stack([cached[key] for key in keys]).astype(np.float32)
    last_token = tokenizer.convert_ids_to_tokens(tokenizer(prompts[0], add_special_tokens=False)["input_ids"][-1])
    return ModelFeatures(label, model, tuple(k[0] for k in keys), states, len(questions) - len(missing), len(missing),
                         seconds, str(last_token))
