"""Which models ``tomrl analyze interventions`` and ``tomrl analyze probes`` run.

    parse_model("rl=runs/x/final")      # ("rl", "runs/x/final"): a --model LABEL=PATH argument
    parse_model("runs/x/final/")        # ("final", "runs/x/final/"): a plain PATH is labelled by its last part
    demo_models(Path("runs/demo"), base="smollm2-135m")
        # [("base", …), ("warm start", runs/demo/train/warm_start/model), ("RL", runs/demo/train/final)]

One place knows where ``tomrl demo`` leaves its models, so both analyses label them alike.
"""

from __future__ import annotations

from pathlib import Path

from tomrl.config import ConfigError
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
