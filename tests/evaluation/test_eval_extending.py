"""Extension points, exactly as the "Extending tomrl" docs page shows them: a benchmark and an engine
added through their registries from a user's own module, then run by `tomrl eval` on a tiny real model.

The two modules and the two commands below are the page's, word for word (only ``--out`` points
into the test's folder); the tests write the modules to a folder on ``sys.path``, import them (which
registers), and run the commands. ``tiny-qwen2`` is tomrl's 2-layer random model (built offline).
"""

from __future__ import annotations

import json
import sys

import pytest

from tomrl.cli import main

MY_BENCHMARKS = '''\
"""My benchmark for tomrl eval: where is the apple (reality questions, one-sentence stories)."""

from tomrl.evaluation.benchmarks import Benchmark, register_benchmark
from tomrl.schema import Example


def load_boxes(path, boxes=("red_box", "blue_box")):
    """The examples: (the run's data_paths["boxes"] or None, **loader_options) -> list[Example]."""
    return [
        Example(
            id=f"boxes-{i}", source="boxes", split="test", story=f"Anna put the apple in the {box}.",
            question="Where is the apple?", answer=box, order=0, question_type="reality",
            deception=None, story_length=1, story_id=f"boxes-{i}",
        )
        for i, box in enumerate(boxes)
    ]


register_benchmark(
    Benchmark(
        name="boxes",
        title="Boxes",
        version="1",  # bump when the data, prompt or scoring change: a run folder never mixes versions
        loader="my_benchmarks:load_boxes",
        loader_options={"boxes": ["red_box", "blue_box", "green_box", "yellow_box"]},
        schemes=("strict",),  # answer-checking schemes of tomrl.rewards.answer, reported side by side
        description="where is the apple: one-sentence stories, order 0",
    )
)
'''

MY_ENGINES = '''\
"""My engine for tomrl eval: transformers' generate, one prompt at a time, greedy."""

from tomrl.generation import Completion, cut_at_stop, register_engine


class PlainEngine:
    name = "plain"
    prompt_kind = "text"  # prompts arrive rendered with self.tokenizer, prefill included

    def __init__(self, model: str):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from tomrl.models import resolve_model

        self.model_name = model
        path = resolve_model(model)  # tomrl's model names (smollm2-135m, tiny-qwen2) to their folder; others unchanged
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModelForCausalLM.from_pretrained(path)

    def describe(self) -> dict:
        return {"engine": self.name, "model": self.model_name}

    def generate(self, prompts, sampling):
        if not sampling.greedy:
            raise ValueError("the plain engine decodes greedily only: set temperature=0 (--greedy)")
        for index, prompt in enumerate(prompts):
            ids = self.tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids
            new = self.model.generate(ids, max_new_tokens=sampling.max_new_tokens, do_sample=False)[0, ids.shape[1]:]
            text, stopped = cut_at_stop(self.tokenizer.decode(new, skip_special_tokens=True), sampling.stop)
            ended = "stop" if stopped else "length" if len(new) == sampling.max_new_tokens else "eos"
            yield Completion(index=index, text=text, tokens=len(new), prompt_tokens=ids.shape[1], finish_reason=ended)


@register_engine("plain", description="transformers' generate, one prompt at a time, greedy")
def make_plain(cfg):
    return PlainEngine(cfg.model)
'''


@pytest.fixture
def user_modules(tmp_path, monkeypatch):
    """The page's two modules in a folder on sys.path; the registries are restored afterwards."""
    from tomrl.evaluation import benchmarks
    from tomrl.generation import registry

    monkeypatch.setattr(benchmarks, "BENCHMARKS", dict(benchmarks.BENCHMARKS))
    monkeypatch.setattr(registry, "ENGINES", dict(registry.ENGINES))
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "my_benchmarks.py").write_text(MY_BENCHMARKS)
    (folder / "my_engines.py").write_text(MY_ENGINES)
    monkeypatch.syspath_prepend(str(folder))
    yield
    for name in ("my_benchmarks", "my_engines"):
        sys.modules.pop(name, None)


def _eval(args: list[str], out) -> dict:
    """The page's command, with ``out`` for its ``--out``."""
    assert main([str(out) if arg.startswith("runs/eval/") else arg for arg in args]) == 0
    return json.loads((out / "results.json").read_text())


# The page's commands, word for word.
EVAL_BOXES = ["eval", "--model", "tiny-qwen2", "--benchmark", "boxes", "--out", "runs/eval/boxes", "--greedy", "max_new_tokens=8"]
EVAL_BOXES_PLAIN = ["eval", "--engine", "plain", "--model", "tiny-qwen2", "--benchmark", "boxes", "--out", "runs/eval/plain", "--greedy", "max_new_tokens=8"]


def test_a_registered_benchmark_is_listed_validated_and_evaluated(user_modules, tmp_path, capsys):
    assert main(["eval", "--benchmark", "boxes", "--out", str(tmp_path / "x")]) == 2  # not registered yet
    assert "unknown benchmark 'boxes'" in capsys.readouterr().err

    import my_benchmarks  # noqa: F401  (registers "boxes")

    assert main(["eval", "--list"]) == 0
    assert "boxes" in capsys.readouterr().out
    results = _eval(EVAL_BOXES, tmp_path / "run")
    bench = results["benchmarks"]["boxes"]
    assert bench["complete"] and bench["n_answered"] == 4 and bench["loader_options"] == {"boxes": ["red_box", "blue_box", "green_box", "yellow_box"]}
    assert bench["schemes"] == ["strict"] and bench["metric"] == "accuracy" and bench["prompt_style"] == "paper_a"
    assert set(bench["overall"]) >= {"strict"} and "paper_eval" not in bench["overall"]  # the declaration's schemes only
    assert list(results["schemes"]) == ["strict"]
    rows = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert sorted(r["gold"] for r in rows) == ["blue_box", "green_box", "red_box", "yellow_box"]  # the loader_options' boxes
    assert all(r["prompt"].endswith("<think>") and "correct" in r and "paper_correct" not in r for r in rows)
    assert "| boxes | 4 | – |" in (tmp_path / "run" / "table.md").read_text()  # no paper_eval column for it

    cot = _eval([*EVAL_BOXES, "prompt.style=cot"], tmp_path / "cot")  # the run's prompt applies to it
    assert cot["benchmarks"]["boxes"]["prompt_style"] == "cot"


def test_a_registered_engine_evaluates_the_registered_benchmark(user_modules, tmp_path):
    import my_benchmarks  # noqa: F401
    import my_engines  # noqa: F401

    plain = _eval(EVAL_BOXES_PLAIN, tmp_path / "plain")
    assert plain["engine"] == {"engine": "plain", "model": "tiny-qwen2"}
    assert plain["benchmarks"]["boxes"]["n_answered"] == 4
    _eval([*EVAL_BOXES, "dtype=float32"], tmp_path / "hf")  # the hf engine in the plain engine's float32
    outputs = {}
    for name in ("plain", "hf"):
        rows = [json.loads(line) for line in (tmp_path / name / "samples.jsonl").read_text().splitlines()]
        outputs[name] = {row["id"]: (row["output"], row["tokens"]) for row in rows}
    assert outputs["plain"] == outputs["hf"]  # greedy decoding of the same model: the same answers
