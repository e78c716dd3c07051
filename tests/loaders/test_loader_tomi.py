"""ToMi loader: counts per split and question type, the order mapping, and the official bAbI files."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tomrl.io import BadInputError
from tomrl.loaders.registry import load


@pytest.fixture(scope="module")
def tomi_test(shared_data):
    return load("tomi")


def test_counts_and_types(tomi_test):
    assert len(tomi_test) == 5994
    assert len({e.story_id for e in tomi_test}) == 999
    types = Counter(e.question_type for e in tomi_test)
    assert types["memory"] == types["reality"] == 999
    # PROVENANCE.md (test): first_order no_tom 1594 / tom 404, second_order no_tom 1448 / tom 550
    assert types["first_order_0_no_tom"] + types["first_order_1_no_tom"] == 1594 and types["first_order_1_tom"] == 404
    assert types["second_order_0_no_tom"] + types["second_order_1_no_tom"] == 1448
    assert types["second_order_0_tom"] + types["second_order_1_tom"] == 550
    assert sum(e.meta["tom"] for e in tomi_test if "tom" in e.meta) == 404 + 550


def test_order_mapping(tomi_test):
    for e in tomi_test:
        expected = 0 if e.question_type in ("memory", "reality") else 1 if e.question_type.startswith("first") else 2
        assert e.order == expected
    assert Counter(e.order for e in tomi_test) == {0: 1998, 1: 1998, 2: 1998}


def test_second_order_label_noise_is_flagged(tomi_test):
    disputed = [e for e in tomi_test if e.meta["oracle_disputes"]]
    assert len(disputed) == 464
    assert all(e.order == 2 and e.question_type.endswith("no_tom") for e in disputed)


def test_splits(shared_data):
    train = load("tomi", split="train", oracle=False)
    assert len(train) == 5994 and all(e.split == "train" for e in train)
    assert {e.split for e in load("tomi", split="validation", oracle=False)} == {"validation"}


def _write_babi(rows, path):
    lines, traces = [], []
    for r in rows:
        for i, sentence in enumerate(r["story_lines"], start=1):
            lines.append(f"{i} {sentence}")
        lines.append(f"{len(r['story_lines']) + 1} {r['question']}\t{r['answer']}\t1")
        traces.append(",".join(r["trace"] + [r["question_type"], r["story_type"]]))
    path.write_text("\n".join(lines) + "\n")
    return traces


def test_official_babi_files(shared_data, tmp_path):
    rows = [json.loads(line) for line in (shared_data / "tomi" / "tomi_test.jsonl").read_text().splitlines()[:12]]
    txt = tmp_path / "fb_all_test.txt"
    traces = _write_babi(rows, txt)
    without_trace = load("tomi", path=txt, oracle=False)
    assert [e.question_type for e in without_trace][:4] == ["memory", "first_order", "second_order", "reality"]
    txt.with_suffix(".trace").write_text("\n".join(traces) + "\n")
    loaded = load("tomi", path=txt, oracle=False)
    reference = load("tomi", oracle=False)[:12]
    assert len(loaded) == 12
    for a, b in zip(loaded, reference):
        assert (a.story, a.question, a.answer, a.question_type, a.order, a.story_id, a.split) == (b.story, b.question, b.answer, b.question_type, b.order, b.story_id, b.split)
        assert a.meta["story_type"] == b.meta["story_type"] and a.meta["trace"] == b.meta["trace"]


def test_bad_babi_line(tmp_path):
    txt = tmp_path / "fb_all_test.txt"
    txt.write_text("1 Anna entered the kitchen.\n2 Where is the apple really?\t\t1\n")
    with pytest.raises(BadInputError, match=r"fb_all_test\.txt:2: field 'answer'"):
        load("tomi", path=txt, oracle=False)
    txt.write_text("Anna entered the kitchen.\n")
    with pytest.raises(BadInputError, match=r"fb_all_test\.txt:1: expected '<number> <sentence>'"):
        load("tomi", path=txt, oracle=False)
