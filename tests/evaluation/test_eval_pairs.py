"""Contrast-pair benchmarks: whole pairs selected, pair accuracy and answer-unchanged rate from hand-made answers."""

from __future__ import annotations

import json
from collections import Counter

from tomrl.evaluation.benchmarks import BENCHMARKS, load_examples, pair_key, select
from tomrl.evaluation.config import EvalConfig
from tomrl.generation.base import Completion
from tomrl.evaluation.results import summarize_pairs
from tomrl.evaluation.runner import run_eval
from tomrl.stats import accuracy

HELDOUT_N, HELDOUT_SEED = 4, 11


class ScriptedEngine:
    """Answers each prompt with the completion ``answer_for(example)`` gives for the example it asks."""

    name = model_name = "scripted"
    prompt_kind = "messages"
    tokenizer = None

    def __init__(self, examples, answer_for):
        self.examples = examples
        self.answer_for = answer_for

    def describe(self):
        return {"engine": "scripted", "model": "scripted"}

    def generate(self, prompts, sampling):
        for index, messages in enumerate(prompts):
            content = messages[-1]["content"]
            (example,) = [e for e in self.examples if e.story in content and e.question in content]
            text = self.answer_for(example)
            yield Completion(index, text, tokens=len(text), prompt_tokens=len(content), finish_reason="stop")


def _answer(container: str | None) -> str:
    return "I am not sure." if container is None else f"<think>the story says so</think><answer>{container}</answer>"


def _run(tmp_path, benchmark: str, answer_for, limit=None):
    examples = load_examples(BENCHMARKS[benchmark], {}, HELDOUT_N, HELDOUT_SEED)
    cfg = EvalConfig(model="scripted", benchmarks=[benchmark], heldout_n=HELDOUT_N, heldout_seed=HELDOUT_SEED, limit=limit, out=str(tmp_path / "run"))
    outcome = run_eval(cfg, log=lambda message: None, engine=ScriptedEngine(examples, answer_for))
    return examples, outcome.results["benchmarks"][benchmark]


def _pair_index(examples) -> dict[str, int]:
    """Each pair's position (0, 1, …) in the benchmark's order."""
    index: dict[str, int] = {}
    for example in examples:
        index.setdefault(pair_key(example), len(index))
    return index


def test_counterfactual_pair_accuracy_from_hand_made_answers(tmp_path):
    examples = load_examples(BENCHMARKS["tomrl-hitom-pairs"], {}, HELDOUT_N, HELDOUT_SEED)
    assert len(examples) == 2 * 8  # heldout_n questions per order, orders 0-3 (order 4: swaps only)
    position = _pair_index(examples)
    golds = {(pair_key(e), e.meta["pair_member"]): e.answer for e in examples}

    def answer_for(example):
        pattern = position[pair_key(example)] % 4
        member = example.meta["pair_member"]
        if pattern == 0:  # both right
            return _answer(example.answer)
        if pattern == 1:  # member 0's gold for both: unchanged, one right
            return _answer(golds[(pair_key(example), 0)])
        if pattern == 2:  # both wrong, different answers
            wrong = [c for c in example.choices if c not in golds.values()]
            return _answer(wrong[member])
        return _answer(None) if member == 0 else _answer(example.answer)  # no answer, then right

    _, bench = _run(tmp_path, "tomrl-hitom-pairs", answer_for)
    pairs = bench["pairs"]
    # Pairs 0..7 follow patterns 0,1,2,3,0,1,2,3: two of each.
    assert pairs["kind"] == "counterfactual" and pairs["n_pairs"] == 8 and pairs["n_incomplete"] == 0
    strict = pairs["strict"]
    assert strict["pair_accuracy"] == accuracy([True] * 2 + [False] * 6).to_dict()
    assert (strict["item_accuracy"]["k"], strict["item_accuracy"]["n"]) == (2 * 2 + 2 + 2, 16)
    assert strict["item_accuracy"]["k"] == bench["overall"]["strict"]["accuracy"]["k"]
    assert (strict["answer_unchanged"]["k"], strict["answer_unchanged"]["n"]) == (2, 6)  # pattern 3 has no answer to compare
    assert pairs["paper_eval"]["pair_accuracy"]["k"] == 2
    assert sum(group["n_pairs"] for group in pairs["by_order"].values()) == 8 and set(pairs["by_order"]) == {"0", "1", "2", "3"}
    table = (tmp_path / "run" / "table.md").read_text()
    assert "| tomrl-hitom-pairs | counterfactual | 8 |" in table
    assert json.loads((tmp_path / "run" / "results.json").read_text())["benchmarks"]["tomrl-hitom-pairs"]["pairs"] == pairs


def test_agent_swap_shortcut_keeps_its_answer(tmp_path):
    examples = load_examples(BENCHMARKS["tomrl-hitom-swap"], {}, HELDOUT_N, HELDOUT_SEED)
    first = {e.meta["swap_id"]: e.answer for e in examples if e.meta["swap_member"] == 0}
    # A shortcut that ignores who is asked: the same answer for both questions about a story.
    _, bench = _run(tmp_path, "tomrl-hitom-swap", lambda e: _answer(first[e.meta["swap_id"]]))
    pairs = bench["pairs"]
    assert pairs["kind"] == "agent_swap" and pairs["n_pairs"] == 8
    assert pairs["strict"]["pair_accuracy"]["k"] == 0
    assert pairs["strict"]["answer_unchanged"]["value"] == 1.0
    assert pairs["strict"]["item_accuracy"]["value"] == 0.5


def test_limit_takes_whole_pairs_spread_over_orders(tmp_path):
    examples = load_examples(BENCHMARKS["tomrl-hitom-pairs"], {}, HELDOUT_N, HELDOUT_SEED)
    chosen = select(examples, 7, seed=0)
    assert len(chosen) == 6 and all(count == 2 for count in Counter(pair_key(e) for e in chosen).values())
    assert len({e.order for e in chosen}) == 3
    assert {e.id for e in chosen} <= {e.id for e in select(examples, 12, seed=0)}
    assert len(select(examples, 1, seed=0)) == 2  # never half a pair
    _, bench = _run(tmp_path, "tomrl-hitom-pairs", lambda e: _answer(e.answer), limit=4)
    assert bench["n_selected"] == 4 and bench["pairs"]["n_pairs"] == 2 and bench["pairs"]["strict"]["pair_accuracy"]["value"] == 1.0


def test_unpaired_benchmarks_have_no_pair_metrics_and_half_answered_pairs_do_not_count():
    examples = load_examples(BENCHMARKS["tomrl-hitom-order1"], {}, HELDOUT_N, HELDOUT_SEED)
    assert summarize_pairs([(e, None) for e in examples]) is None
    paired = load_examples(BENCHMARKS["tomrl-hitom-swap"], {}, 1, HELDOUT_SEED)
    row = {"correct": True, "paper_correct": True, "extracted": "x", "paper_extracted": "x"}
    summary = summarize_pairs([(e, row if e.meta["swap_member"] == 0 else None) for e in paired])
    assert summary["n_pairs"] == 0 and summary["n_incomplete"] == 2
