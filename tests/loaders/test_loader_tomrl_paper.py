"""ToM-RL release loaders: the training set, the merged test file and Paper A's five evaluation sets."""

from __future__ import annotations

import shutil
from collections import Counter

import pytest

from tomrl.loaders.registry import LOADERS, load

PAPER_SETS = ["tomrl-paper-hitom600", "tomrl-paper-hitom4", "tomrl-paper-tomi", "tomrl-paper-exploretom", "tomrl-paper-exploretom-infilled"]


@pytest.fixture(scope="module")
def train(shared_data):
    return load("tomrl-paper-train")


@pytest.fixture(scope="module")
def merged(shared_data):
    return load("tomrl-paper-test-merged")


def test_every_release_loader_has_its_documented_count(shared_data):
    for name in [n for n in LOADERS if n.startswith("tomrl-paper")]:
        assert len(load(name)) == LOADERS[name].card.counts["rows"], name


def test_training_set(train):
    sources = Counter(e.source for e in train)
    assert sources == {"tomrl-paper-hitom": 2000, "tomrl-paper-exploretom": 1200}
    hitom_orders = Counter(e.order for e in train if e.source == "tomrl-paper-hitom")
    assert hitom_orders == {0: 515, 1: 487, 2: 500, 3: 498}
    explore_orders = Counter(e.meta["nth_order"] for e in train if e.source == "tomrl-paper-exploretom")
    assert explore_orders == {-1: 428, 1: 158, 2: 614}
    assert len({e.story_id for e in train}) == 900
    assert all(e.split == "train" and e.meta["release_prompt"].endswith("<|im_start|>assistant\n<think>") for e in train)
    assert all(e.deception is not None and e.story_length in (1, 2, 3) for e in train if e.source == "tomrl-paper-hitom")


def test_merged_test_file(merged):
    assert Counter(e.source for e in merged) == {"tomrl-paper-tomi": 5994, "tomrl-paper-exploretom": 1066, "tomrl-paper-hitom": 1000}
    assert Counter(e.order for e in merged if e.source == "tomrl-paper-hitom") == {0: 85, 1: 113, 2: 100, 3: 102, 4: 600}
    assert Counter(e.meta["nth_order"] for e in merged if e.source == "tomrl-paper-exploretom") == {-1: 178, 1: 118, 2: 770}
    assert Counter(e.meta["story_type"] for e in merged if e.source == "tomrl-paper-tomi") == {
        "true_belief": 1998, "false_belief": 1998, "second_order_false_belief": 1998}
    assert sum(e.question.startswith(" ") for e in merged) == 2064  # kept verbatim, as in the paper's prompts


def test_paper_evaluation_sets_as_the_paper_used_them(shared_data, merged):
    hitom600 = load("tomrl-paper-hitom600")
    assert Counter(e.order for e in hitom600) == {o: 120 for o in range(5)}
    assert not any("/" in e.question for e in hitom600)  # question_old: open-ended
    assert all(len(e.choices) == 15 for e in hitom600)
    hitom4 = load("tomrl-paper-hitom4")
    assert [e.id for e in hitom4] == [e.id for e in merged if e.source == "tomrl-paper-hitom" and e.order == 4]
    structured = load("tomrl-paper-exploretom")
    infilled = load("tomrl-paper-exploretom-infilled")
    assert [e.story_id for e in infilled] == [e.story_id for e in structured]
    assert [e.question for e in infilled] == [e.question for e in structured]
    assert all(a.story != b.story and a.meta["story_structure"] == b.story for a, b in zip(infilled, structured))


def test_hitom600_is_hitom_with_cot_labels(shared_data):
    ours = {(e.story, e.question): e.answer for e in load("hitom", oracle=False)}
    release = load("tomrl-paper-hitom600")
    assert all(ours[(e.story.strip(), e.question)] == e.answer for e in release)


def test_orders_from_question_form_when_metadata_is_absent(shared_data, train, tmp_path, monkeypatch):
    shutil.copy(shared_data / "tomrl_paper" / "tomrl_train_3200.jsonl", tmp_path)
    monkeypatch.setenv("TOMRL_DATA", str(tmp_path / "nowhere"))
    bare = load("tomrl-paper-train", path=tmp_path / "tomrl_train_3200.jsonl")
    assert all(e.meta.get("order_from") == "question form" for e in bare)
    assert [e.order for e in bare] == [e.order for e in train]


def test_original_release_files(shared_data, tmp_path, monkeypatch):
    """The release's own parquet and CSV files load like the JSONL conversions."""
    import csv
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    lines = (shared_data / "tomrl_paper" / "tomrl_test_merged_8060.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines[:4] + lines[-4:]]
    for row in rows:
        row.pop("source_file")
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "ToM_test_HiExTi_hint.parquet")
    csv_rows = [json.loads(line) for line in (shared_data / "tomrl_paper" / "hitom_600_eval.jsonl").read_text().splitlines()[:3]]
    with open(tmp_path / "Hi_ToM_cleaned.csv", "w", newline="") as handle:
        columns = [c for c in csv_rows[0] if c != "source_file"]
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows({c: r[c] for c in columns} for r in csv_rows)
    monkeypatch.setenv("TOMRL_DATA", str(shared_data))
    merged = load("tomrl-paper-test-merged")
    reference = merged[:4] + merged[-4:]
    loaded = load("tomrl-paper-test-merged", path=tmp_path)
    assert [(e.story, e.question, e.answer, e.order, e.question_type, e.source) for e in loaded] == [
        (e.story, e.question, e.answer, e.order, e.question_type, e.source) for e in reference]
    hitom = load("tomrl-paper-hitom600", path=tmp_path)
    assert [(e.story, e.question, e.answer, e.order, e.deception, e.choices) for e in hitom] == [
        (e.story, e.question, e.answer, e.order, e.deception, e.choices) for e in load("tomrl-paper-hitom600")[:3]]
