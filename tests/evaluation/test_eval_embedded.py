"""The real embedded model (SmolLM2-135M): slow, run with `pytest -m slow`."""

from __future__ import annotations

import json

import pytest

from tomrl.models import is_prepared

pytestmark = [
    pytest.mark.slow,
    pytest.mark.embedded,
    pytest.mark.skipif(not is_prepared("smollm2-135m"), reason="run `tomrl models prepare smollm2-135m` first"),
]


def test_slots_path_equals_plain_generate_in_float32(chat_prompts):
    from tomrl.generation.base import Sampling
    from tomrl.generation.hf import HFEngine
    from tomrl.models import resolve_model

    path = resolve_model("smollm2-135m")
    sampling = Sampling(temperature=0, max_new_tokens=32, stop=())
    fast = HFEngine(path, dtype="float32", device="cpu", mode="slots", batch_size=4)
    plain = HFEngine(path, dtype="float32", device="cpu", mode="generate", batch_size=1)
    ours = sorted(fast.generate(chat_prompts, sampling), key=lambda c: c.index)
    theirs = sorted(plain.generate(chat_prompts, sampling), key=lambda c: c.index)
    assert [c.text for c in ours] == [c.text for c in theirs]
    assert [c.tokens for c in ours] == [c.tokens for c in theirs]


def test_paper_suite_end_to_end(tmp_path, shared_data):
    from tomrl.cli import main

    out = tmp_path / "run"
    assert main(["eval", "--model", "smollm2-135m", "--benchmark", "paper", "--limit", "3", "--out", str(out), "max_new_tokens=48"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert set(results["benchmarks"]) == {"hitom600", "hitom4", "tomi", "exploretom", "exploretom-infilled"}
    for bench in results["benchmarks"].values():
        assert bench["complete"] and bench["overall"]["n"] == 3 and bench["by_order"]
        assert bench["tokens_per_s"] > 0
    assert "| smollm2-135m (tomrl, paper scoring) |" in (out / "table.md").read_text()
