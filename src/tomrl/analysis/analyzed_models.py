"""Which models ``tomrl analyze interventions`` and ``tomrl analyze probes`` run.

    parse_model("rl=runs/x/final")      # ("rl", "runs/x/final"): a --model LABEL=PATH argument
    parse_model("runs/x/final/")        # ("final", "runs/x/final/"): a plain PATH is labelled by its last part
    demo_models(Path("runs/demo"), base="smollm2-135m")
        # [("base", …), ("warm start", runs/demo/train/warm_start/model), ("RL", runs/demo/train/final)]

    check_models(["runs/x/final"], {"--max-new-tokens": 128})
        # before any output: each model loads (config.json, weights' headers, tokenizer) and fits 128 new tokens

One place knows where ``tomrl demo`` leaves its models, so both analyses label them alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping

from tomrl.config import ConfigError
from tomrl.models import check_generation_length, check_model_reference
from tomrl.training.sft_warmstart import WARM_START


def parse_model(text: str) -> tuple[str, str]:
    """``LABEL=PATH`` → (LABEL, PATH); a plain PATH (or embedded name) is labelled by its last part."""
    label, sep, path = text.partition("=")
    if sep and label.strip() and path.strip():
        return label.strip(), path.strip()
    if sep:
        raise ConfigError(f"--model {text!r}: expected LABEL=PATH or PATH")
    return Path(text.rstrip("/")).name or text, text


def demo_models(run_dir: Path, base: str) -> list[tuple[str, str]]:
    """The demo's ``base`` model, then its warm start and its RL model (``final/``), each where it exists."""
    models = [("base", base)]
    for label, folder in (("warm start", run_dir / "train" / WARM_START / "model"), ("RL", run_dir / "train" / "final")):
        if folder.is_dir():
            models.append((label, str(folder)))
    return models


def check_models(paths: Iterable[str], generation_lengths: Mapping[str, int] | None = None, key: str = "--model") -> None:
    """Raise ConfigError, before anything is written, when a model cannot load or cannot generate as asked.

    Each of ``paths`` (embedded name, hub id or folder) must pass :func:`tomrl.models.check_model_reference`
    (config.json, the weights' safetensors headers against it, a tokenizer), and its context must hold each
    of ``generation_lengths`` (flag → new tokens; :func:`tomrl.models.check_generation_length`).
    """
    for path in paths:
        check_model_reference(path, key=key)
        for flag, tokens in (generation_lengths or {}).items():
            check_generation_length(path, tokens, key=flag)
