"""Benchmark declarations: every one resolves to a loader, prompt and schemes; the registry; selection."""

from __future__ import annotations

from collections import Counter

import pytest

from tomrl.config import ConfigError
from tomrl.evaluation.benchmarks import BENCHMARKS, PAPER_SUITE, SUITES, Benchmark, load_examples, register_benchmark, resolve, select
from tomrl.evaluation.results import METRICS
from tomrl.loaders.registry import LOADERS
from tomrl.prompts import PromptConfig
from tomrl.rewards.answer import SCHEMES
from tomrl.schema import Example


@pytest.mark.parametrize("name", list(BENCHMARKS))
def test_declaration_is_complete(name):
    bench = BENCHMARKS[name]
    assert bench.name == name and bench.title and bench.version and bench.description
    assert bench.loader in LOADERS or bench.loader in ("tomrl-generate", "gsm8k-jsonl")
    assert bench.prompt_for(None) == (PromptConfig("gsm8k") if name == "gsm8k" else PromptConfig("paper_a"))
    assert set(bench.schemes) <= set(SCHEMES) and bench.metric in METRICS
    if bench.loader in LOADERS:
        assert set(bench.loader_options) <= set(LOADERS[bench.loader].options)


def test_paper_suite_is_table_1():
    assert [BENCHMARKS[n].paper_column for n in SUITES["paper"]] == ["Hi-ToM", "4th-order", "ToMi", "ExploreToM", "ExploreToM infilled"]
    assert set(PAPER_SUITE) < set(SUITES["tom"]) < set(SUITES["all"])


def test_resolve_suites_and_names():
    chosen = resolve(["paper,opentom", "tomi"])
    assert [b.name for b, _ in chosen] == [*PAPER_SUITE, "opentom"]
    assert dict((b.name, optional) for b, optional in resolve(["all"]))["fantom"] is True  # skipped when absent
    assert resolve(["fantom"])[0][1] is False  # named explicitly: its absence is an error
    with pytest.raises(ConfigError, match="did you mean 'hitom600'"):
        resolve(["hitom60"])


PAPER_COUNTS = {"hitom600": 600, "hitom4": 600, "tomi": 5994, "exploretom": 1066, "exploretom-infilled": 1066}


@pytest.mark.parametrize("name", list(PAPER_COUNTS))
def test_paper_benchmarks_load(name, shared_data):
    examples = load_examples(BENCHMARKS[name], {}, 10, 1)
    assert len(examples) == PAPER_COUNTS[name]
    if name == "hitom600":
        assert Counter(e.order for e in examples) == {k: 120 for k in range(5)}
        assert examples[0].question == "Where is the lettuce really?"  # the open question (question_old)
    if name == "hitom4":
        assert {e.order for e in examples} == {4}
    if name == "exploretom-infilled":
        assert examples[0].story != load_examples(BENCHMARKS["exploretom"], {}, 10, 1)[0].story


def test_paper_prompt_is_the_released_one(shared_data):
    # The paper_a prompt rendered with a ChatML template equals the release's own prompt.
    from transformers import AutoTokenizer

    from tomrl.models import embedded_tokenizer_dir
    from tomrl.prompts import render_prompt

    tokenizer = AutoTokenizer.from_pretrained(str(embedded_tokenizer_dir()))
    example = load_examples(BENCHMARKS["tomi"], {}, 10, 1)[0]
    text = render_prompt(example, tokenizer, BENCHMARKS["tomi"].prompt_for(None))
    assert text == example.meta["release_prompt"]


def test_heldout_sets_are_generated_by_order():
    examples = load_examples(BENCHMARKS["tomrl-hitom-order2"], {}, 8, 123)
    assert len(examples) == 8 and {e.order for e in examples} == {2} and {e.split for e in examples} == {"test"}
    assert [e.id for e in examples] == [e.id for e in load_examples(BENCHMARKS["tomrl-hitom-order2"], {}, 8, 123)]


def _examples(orders):
    return [Example(id=f"e{i}", source="s", split="test", story="st", question="q", answer="a", order=o, question_type="t",
                    deception=None, story_length=None, story_id=f"s{i}") for i, o in enumerate(orders)]


def test_select_spreads_over_orders_and_extends():
    examples = _examples([0] * 50 + [1] * 30 + [2] * 5 + [None] * 15)
    picked = select(examples, 12, seed=0)
    assert Counter(e.order for e in picked) == {0: 3, 1: 3, 2: 3, None: 3}
    assert [e.id for e in picked] == sorted((e.id for e in picked), key=lambda i: int(i[1:]))  # original order kept
    bigger = select(examples, 40, seed=0)
    assert {e.id for e in picked} < {e.id for e in bigger}
    assert Counter(e.order for e in bigger)[2] == 5  # a small order is taken whole
    assert select(examples, 12, seed=1) != picked
    assert select(examples, None, seed=0) == examples and select(examples, 1000, seed=0) == examples


def test_vllm_engine_reports_missing_package_and_maps_reasons():
    import importlib.util

    from tomrl.generation.vllm import VLLMEngine, finish_reason

    assert finish_reason("length", None) == "length"
    assert finish_reason("stop", "</answer>") == "stop"
    assert finish_reason("stop", None) == "eos" and finish_reason("stop", 2) == "eos"
    if importlib.util.find_spec("vllm") is None:
        from tomrl.config import ConfigError

        with pytest.raises(ConfigError, match=r"pip install 'tomrl\[vllm\]'"):
            VLLMEngine("smollm2-135m")


def test_a_jsonl_file_is_a_benchmark_named_after_it(tmp_path):
    from tomrl.generators import generate
    from tomrl.generators.config import GenerateConfig
    from tomrl.schema import write_examples

    path = tmp_path / "my_set.jsonl"
    write_examples(path, generate(GenerateConfig(n=6, seed=2, orders=[1, 2], lengths=[1], split_fractions={"test": 1.0})))
    [(benchmark, optional)] = resolve([str(path)])
    assert benchmark.name == "file-my_set" and not optional and benchmark.loader == "jsonl-file"
    assert [e.id for e in load_examples(benchmark, {}, heldout_n=1, heldout_seed=0)] == [e.id for e in generate(
        GenerateConfig(n=6, seed=2, orders=[1, 2], lengths=[1], split_fractions={"test": 1.0}))]
    first_version = benchmark.version
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:3]))
    assert resolve([str(path)])[0][0].version != first_version  # other content: a run folder will not mix them
    with pytest.raises(ConfigError, match="not found"):
        resolve([str(tmp_path / "missing.jsonl")])


def test_registry_refuses_a_taken_name_and_unknown_schemes(monkeypatch):
    monkeypatch.setattr("tomrl.evaluation.benchmarks.BENCHMARKS", dict(BENCHMARKS))
    with pytest.raises(ValueError, match="already registered"):
        register_benchmark(Benchmark(name="tomi", title="t", version="1", loader="tomi"))
    with pytest.raises(ValueError, match="already registered"):
        register_benchmark(Benchmark(name="paper", title="t", version="1", loader="tomi"))  # a suite's name
    with pytest.raises(ValueError, match="schemes must be some of"):
        Benchmark(name="x", title="x", version="1", loader="tomi", schemes=("lenient",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="metric one of"):
        Benchmark(name="x", title="x", version="1", loader="tomi", metric="f1")


def test_the_run_prompt_applies_unless_a_benchmark_fixes_its_own():
    cot = PromptConfig("cot")
    assert BENCHMARKS["tomi"].prompt_for(cot) == cot and BENCHMARKS["gsm8k"].prompt_for(cot) == PromptConfig("gsm8k")
