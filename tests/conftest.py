"""Shared test fixtures: the shared benchmark data folder and a tiny offline model."""

from __future__ import annotations

from pathlib import Path

import pytest
from tiny_models import chat_prompts, tiny_llama, tiny_qwen2, tiny_qwen3  # noqa: F401  (fixtures shared by tests/generation and tests/evaluation)

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real benchmark files beside the repo; tests that need them skip where absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared benchmark data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A 2-layer Qwen2 model with random weights and the embedded SmolLM2 tokenizer, saved locally."""
    from tomrl.models import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-qwen2"))
