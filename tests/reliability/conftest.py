"""Fixtures of the reliability suite: a hermetic TOMRL_HOME and a few valid generated examples.

Subprocess tests run ``python -m tomrl ...`` with ``TOMRL_HOME`` pointing at a folder made for
this test session (the embedded tokenizer copied in, the 2-layer ``tiny-qwen2`` built there), so
they never touch the user's cache and need no network.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def hermetic_home(tmp_path_factory) -> Path:
    """A TOMRL_HOME holding the embedded tokenizer and the tiny-qwen2 model, built once per session."""
    from tomrl.models import TINY_MODEL, build_tiny_model, embedded_tokenizer_dir

    home = tmp_path_factory.mktemp("tomrl_home")
    tokenizer = embedded_tokenizer_dir()  # the user's cache (or the GGUF package): read only
    shutil.copytree(tokenizer, home / "tokenizers" / tokenizer.name)
    build_tiny_model(home / "models" / TINY_MODEL)
    return home


@pytest.fixture(scope="session")
def generated_examples():
    """A few generated Hi-ToM and ToMi examples (valid, with stories, answers and choices)."""
    from tomrl.generators import generate
    from tomrl.generators.config import GenerateConfig

    hitom = generate(GenerateConfig(benchmark="hitom", n=6, seed=5, lengths=[1], orders=[0, 1, 2], agents=3))
    tomi = generate(GenerateConfig(benchmark="tomi", n=4, seed=5))
    return hitom, tomi
