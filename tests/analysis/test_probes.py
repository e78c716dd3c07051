"""Belief probes (tomrl analyze probes): the shuffled-label control stays at chance, a planted signal is
found at its layer, folds never split a story, the command runs end to end on tiny real models and
reuses its feature cache, bad rows are named, and the report sections render."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tomrl.analysis.probes_fit import (ALL_ORDERS, ProbeOptions, balanced_story_folds, best_layers, probe_all_layers,
                                      story_folds)
from tomrl.analysis.probes_labels import containers_by_first_mention, read_probe_questions, select_questions
from tomrl.io import BadInputError


def _planted(n_stories: int, per_story: int, dims: int, layers: int, signal_layer: int | None, seed: int = 0):
    """Binary labels balanced within each of three orders (so chance = majority = 50 %), and states
    with the label added to one dimension of ``signal_layer`` only (None: no signal anywhere)."""
    rng = np.random.default_rng(seed)
    n = n_stories * per_story
    stories = [f"story-{i // per_story}" for i in range(n)]
    orders = [(i // per_story) % 3 for i in range(n)]
    labels = np.zeros(n, dtype=int)
    for order in range(3):
        index = np.flatnonzero(np.asarray(orders) == order)
        labels[index] = rng.permutation(np.arange(len(index)) % 2)
    states = rng.normal(size=(n, layers, dims))
    if signal_layer is not None:
        states[:, signal_layer, 0] += 3.0 * (labels - 0.5)
    return states, labels, stories, orders


def _all_orders(rows, layer):
    return next(r for r in rows if r["layer"] == layer and r["order"] == ALL_ORDERS)


def test_shuffled_labels_stay_at_chance_where_the_real_labels_are_decodable():
    states, labels, stories, orders = _planted(n_stories=60, per_story=2, dims=24, layers=1, signal_layer=0)
    options = ProbeOptions()
    rows = probe_all_layers(states, labels, stories, orders, options)
    row = _all_orders(rows, 0)
    assert row["n"] == 120 and row["stories"] == 60
    assert row["accuracy"]["value"] > 0.85 and row["accuracy"]["low"] > 0.75  # the signal is there
    # The same probe on permuted labels learns nothing: its interval holds the majority rate.
    assert row["control"]["low"] <= row["majority"] <= row["control"]["high"]
    assert row["control"]["value"] < 0.65
    assert row["control_range"][0] <= row["control"]["value"] <= row["control_range"][1]
    # Over several seeds the control centres on chance.
    controls = []
    for seed in range(5):
        rows = probe_all_layers(states, labels, stories, orders, ProbeOptions(seed=seed, shuffles=1))
        controls.append(_all_orders(rows, 0)["control"]["value"])
    assert abs(np.mean(controls) - 0.5) < 0.08


def test_a_signal_planted_in_one_layer_is_found_there_and_nowhere_else():
    states, labels, stories, orders = _planted(n_stories=80, per_story=2, dims=16, layers=4, signal_layer=2)
    rows = [{"model": "m", "target": "t", **r} for r in probe_all_layers(states, labels, stories, orders, ProbeOptions())]
    best = next(b for b in best_layers(rows) if b["order"] == ALL_ORDERS)
    assert best["layer"] == 2 and best["verdict"] == "above control"
    assert best["accuracy"]["low"] > 0.8
    for layer in (0, 1, 3):  # noise layers: near chance, far below the planted one
        assert _all_orders(rows, layer)["accuracy"]["value"] < 0.65, f"layer {layer} has no signal"
    by_order = [b for b in best_layers(rows) if b["order"] != ALL_ORDERS]
    assert sorted(b["order"] for b in by_order) == [0, 1, 2] and all(b["layer"] == 2 for b in by_order)


def test_without_a_signal_the_best_layer_is_rarely_called_above_control():
    # The best of several correlated layers is compared with the control's best layer, intervals
    # not overlapping: on data without a signal that verdict must stay rare (2.5 % of 40 seeds with
    # 8 layers when this was written; the Wilson intervals alone undercover, see docs/analysis.md).
    verdicts = []
    for seed in range(6):
        states, labels, stories, orders = _planted(n_stories=40, per_story=2, dims=32, layers=3, signal_layer=None, seed=seed)
        options = ProbeOptions(seed=seed, shuffles=2)
        rows = [{"model": "m", "target": "t", **r}
                for r in probe_all_layers(np.cumsum(states, axis=1), labels, stories, orders, options)]
        verdicts += [b["verdict"] for b in best_layers(rows) if b["order"] == ALL_ORDERS]
    assert sum(v == "above control" for v in verdicts) <= 1
    assert all(v == "above control" or v == "inconclusive at n = 80" for v in verdicts)


def test_the_probe_fitted_in_the_training_rows_span_is_the_plain_probe():
    # The PCA step is a rotation onto the span of the training rows, where the L2 solution lies:
    # the probe must predict as a scaler + logistic regression on all dimensions does.
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from tomrl.analysis.probes_fit import out_of_fold_predictions

    rng = np.random.default_rng(0)
    features = rng.normal(size=(50, 120))
    labels = (features[:, :3].sum(axis=1) + rng.normal(size=50) > 0).astype(int) + (features[:, 3] > 1)
    folds = story_folds([str(i) for i in range(50)], 5, 0)
    ours = out_of_fold_predictions(features, labels, folds, ProbeOptions())
    plain = np.empty_like(labels)
    for train, test in folds:
        probe = make_pipeline(StandardScaler(), LogisticRegression(C=0.1, max_iter=5000)).fit(features[train], labels[train])
        plain[test] = probe.predict(features[test])
    assert (ours == plain).mean() >= 0.98  # equal up to the solvers' tolerance


def test_folds_never_put_one_story_in_training_and_test():
    rng = np.random.default_rng(1)
    stories = [f"s{rng.integers(0, 23)}" for _ in range(90)]  # uneven story sizes
    labels = rng.integers(0, 3, size=90)
    for folds in (story_folds(stories, 5, seed=3), story_folds(stories, 5, seed=3, strata=labels.tolist()),
                  balanced_story_folds(labels, stories, [i % 3 for i in range(90)], ProbeOptions())):
        tested = np.concatenate([test for _, test in folds])
        assert sorted(tested.tolist()) == list(range(90))  # every question tested exactly once
        for train, test in folds:
            assert not {stories[i] for i in train} & {stories[i] for i in test}


def test_story_grouped_folds_stop_a_probe_from_memorising_stories():
    # Each story has its own label and a recognisable state; the label carries no general signal.
    # A probe cross-validated by question would recall the story; by story it is at chance.
    rng = np.random.default_rng(0)
    n_stories, per_story, dims = 20, 6, 64  # fewer stories than dimensions: a linear probe can tell them apart
    story_label = rng.permutation(np.arange(n_stories) % 2)
    story_vector = rng.normal(size=(n_stories, dims)) * 3
    index = np.repeat(np.arange(n_stories), per_story)
    states = (story_vector[index] + rng.normal(size=(len(index), dims)))[:, None, :]
    labels = story_label[index]
    stories = [f"s{i}" for i in index]
    orders = [1] * len(index)
    grouped = _all_orders(probe_all_layers(states, labels, stories, orders, ProbeOptions()), 0)
    assert grouped["accuracy"]["low"] <= 0.5 <= grouped["accuracy"]["high"]
    by_question = story_folds([str(i) for i in range(len(index))], 5, 0)  # the leak the grouping prevents
    leaky = _all_orders(probe_all_layers(states, labels, stories, orders, ProbeOptions(), split=lambda y: by_question), 0)
    assert leaky["accuracy"]["value"] > 0.9


# ---------------------------------------------------------------------------- labels and questions


def _write_questions(path: Path, n: int = 12, seed: int = 0) -> list[dict]:
    from tomrl.generators import generate
    from tomrl.generators.config import GenerateConfig
    from tomrl.schema import write_examples

    examples = generate(GenerateConfig(benchmark="hitom", n=n, seed=seed, orders=[0, 1, 2], lengths=[1],
                                       deception=[False], agents=3, distractor_prob=0.0))
    write_examples(path, examples)
    return [e.to_dict() for e in examples]


def test_labels_come_from_the_oracle_and_are_encoded_by_first_mention(tmp_path):
    assert containers_by_first_mention("The pen is in the blue_box_large.\nA moved the pen to the red_box.\nblue_box",
                                       ["red_box", "blue_box", "blue_box_large", "green_jar"]) == (
        "blue_box_large", "red_box", "blue_box")
    rows = _write_questions(tmp_path / "q.jsonl")
    questions = read_probe_questions([tmp_path / "q.jsonl"])
    assert len(questions) == len(rows)
    for question, row in zip(questions, rows):
        labels = question.labels
        assert question.containers[labels["belief"]] == row["answer"]
        assert question.containers[labels["reality"]] == row["meta"]["true_location"]
        assert labels["false_belief"] == int(row["answer"] != row["meta"]["true_location"])
        if row["order"] == 0:
            assert labels["false_belief"] == 0
    chosen = select_questions(questions, 6, seed=0)
    assert sorted(q.example.order for q in chosen) == [0, 0, 1, 1, 2, 2]  # stratified by order
    assert [q.example.id for q in select_questions(questions, 6, seed=0)] == [q.example.id for q in chosen]


@pytest.mark.parametrize("field, edit", [
    ("meta.query.chain", lambda row: row["meta"]["query"].pop("chain")),
    ("meta.query.object", lambda row: row["meta"]["query"].pop("object")),
    ("meta.true_location", lambda row: row["meta"].pop("true_location")),
    ("meta.true_location", lambda row: row["meta"].update(true_location="nowhere_box")),
])
def test_a_row_without_the_oracles_fields_is_named_by_file_row_and_field(tmp_path, field, edit):
    rows = _write_questions(tmp_path / "q.jsonl", n=4)
    edit(rows[2])
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    with pytest.raises(BadInputError) as raised:
        read_probe_questions([bad])
    assert f"{bad}:3" in str(raised.value) and f"'{field}'" in str(raised.value)


# ---------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def probed(tmp_path_factory, tiny_qwen2, tiny_llama):
    """The command run twice on two tiny real models (the second run reads the feature cache)."""
    from tomrl.cli import main

    folder = tmp_path_factory.mktemp("probes")
    _write_questions(folder / "q.jsonl", n=12)
    command = ["analyze", "probes", "--model", f"qwen={tiny_qwen2}", "--model", f"llama={tiny_llama}",
               "--data", str(folder / "q.jsonl"), "--out", str(folder / "out"), "--limit", "0", "--folds", "3"]
    assert main(command) == 0
    first = json.loads((folder / "out" / "probes.json").read_text(encoding="utf-8"))
    assert main(command) == 0
    second = json.loads((folder / "out" / "probes.json").read_text(encoding="utf-8"))
    return folder, first, second


def test_the_command_probes_every_layer_target_and_order_and_reuses_its_cache(probed):
    folder, first, second = probed
    assert first["n"] == 12 and first["stories"] == 12 and first["folds"] == 3
    assert first["orders"] == {"0": 4, "1": 4, "2": 4}
    for label in ("qwen", "llama"):
        model = first["models"][label]
        assert model["layers"] == 3 and model["hidden"] == 64  # embeddings + 2 layers
        assert (model["computed"], model["reused"]) == (12, 0)
        assert (second["models"][label]["computed"], second["models"][label]["reused"]) == (0, 12)
        for target in ("belief", "reality", "false_belief"):
            for order in (ALL_ORDERS, 0, 1, 2):
                layers = sorted(r["layer"] for r in first["results"]
                                if r["model"] == label and r["target"] == target and r["order"] == order)
                assert layers == [0, 1, 2], (label, target, order)
        with np.load(folder / "out" / model["features"], allow_pickle=False) as cache:
            assert cache["states"].shape == (12, 3, 64) and cache["states"].dtype == np.float32
    assert first["results"] == second["results"]  # the cached states give the same probes
    assert "'>'" in first["token"] or "'>'" in first["token"].replace('"', "'")  # the last token of '<think>'
    # The embedding layer at one fixed token carries nothing: every question has the same state there.
    layer0 = [r for r in first["results"] if r["layer"] == 0 and r["order"] == ALL_ORDERS and r["target"] == "reality"]
    assert all(r["accuracy"]["value"] <= r["majority"] + 1e-9 for r in layer0)


def test_the_command_names_a_bad_row(tmp_path, tiny_qwen2, capsys):
    from tomrl.cli import main

    rows = _write_questions(tmp_path / "q.jsonl", n=3)
    del rows[1]["meta"]["query"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    assert main(["analyze", "probes", "--model", str(tiny_qwen2), "--data", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert f"{bad}:2: field 'meta.query.chain'" in capsys.readouterr().err


def test_report_sections_render(probed, tmp_path):
    from tomrl.analysis.document import Document, Figure, render_html, render_markdown
    from tomrl.analysis.probes import report_sections

    folder, first, _ = probed
    sections = report_sections([folder / "out" / "probes.json"], tmp_path)
    assert [s.title for s in sections] == ["Belief probes"]
    figures = [b for b in sections[0].blocks if isinstance(b, Figure)]
    assert figures and (tmp_path / figures[0].file).stat().st_size > 1000
    document = Document("t", sections)
    markdown = render_markdown(document)
    assert "Belief probes" in markdown and "inconclusive at n = 12" in markdown
    assert "control (its best layer)" in markdown and "n = 12 questions from 12 stories" in markdown
    assert "data:image/png;base64" in render_html(document, tmp_path)
    broken = tmp_path / "broken" / "probes.json"
    broken.parent.mkdir()
    broken.write_text("{}", encoding="utf-8")
    left_out = report_sections([broken], tmp_path)
    assert "could not be read" in render_markdown(Document("t", left_out))


def test_demo_plan_takes_the_demos_models_sets_and_output_folder(tmp_path):
    from tomrl.analysis.analyzed_models import parse_model as parse_model_argument
    from tomrl.analysis.probes import demo_plan
    from tomrl.config import ConfigError
    from tomrl.models import DEFAULT_MODEL

    with pytest.raises(ConfigError, match="neutral.jsonl is missing"):
        demo_plan(tmp_path)
    (tmp_path / "eval_sets").mkdir()
    _write_questions(tmp_path / "eval_sets" / "neutral.jsonl", n=3)
    (tmp_path / "train" / "final").mkdir(parents=True)
    plan = demo_plan(tmp_path)
    assert plan.models == [("base", DEFAULT_MODEL), ("RL", str(tmp_path / "train" / "final"))]
    assert plan.data == [str(tmp_path / "eval_sets" / "neutral.jsonl")]
    assert plan.out == tmp_path / "analysis" / "probes" and plan.prompt.style == "paper_a"
    (tmp_path / "train" / "warm_start" / "model").mkdir(parents=True)
    _write_questions(tmp_path / "eval_sets" / "neutral-orders3-4.jsonl", n=3, seed=1)
    plan = demo_plan(tmp_path)
    assert [label for label, _ in plan.models] == ["base", "warm start", "RL"] and len(plan.data) == 2
    assert parse_model_argument("rl=runs/x/final") == ("rl", "runs/x/final")
    assert parse_model_argument("runs/x/final/") == ("final", "runs/x/final/")
