"""`tomrl report` end to end on constructed run folders: each detector fires where it must and
stays quiet where it must not; HTML and Markdown hold the same content; bad input is named."""

from __future__ import annotations

import json
import re

import pytest

from tomrl.analysis.report import default_options, write_report
from tomrl.analysis.runs import load_runs
from tomrl.cli import main


def detectors(out):
    return {(d["name"], d["subject"]): d for d in json.loads((out / "detectors.json").read_text())["detectors"]}


def by_name(out, name):
    return [d for (n, _), d in detectors(out).items() if n == name]


@pytest.fixture(scope="module")
def collapsed_run(tmp_path_factory):
    from analysis_run_folders import collapsing, write_training_run

    def fading(example, step):  # early rollouts name the asked agents and re-check; late ones do neither
        if step < 40:
            return f"Wait, {' and '.join(example.meta['query']['chain'])} matter.</think><answer>{example.answer}</answer>"
        return f"The end.</think><answer>{example.answer}</answer>"

    root = tmp_path_factory.mktemp("collapse")
    write_training_run(
        root / "rl-small",
        length=collapsing,
        reward=lambda s: -2.0 + 4.0 * (1 - 2.718 ** (-s / 40)),
        accuracy=lambda s, in_distribution: (0.3 + 0.5 * s / 118) if in_distribution else 0.3,
        belief_share=lambda s: 0.9 - 0.8 * s / 118,
        entropy=lambda s: 0.9 * 2.718 ** (-s / 30) + 0.05,
        rollout=fading, rollout_steps=4,
    )
    return root


def test_report_on_a_collapsing_diverging_run(collapsed_run, tmp_path):
    out = tmp_path / "report"
    assert main(["report", str(collapsed_run), "--out", str(out)]) == 0
    collapse = by_name(out, "reasoning_collapse")[0]
    assert collapse["fired"], collapse["explanation"]
    belief = dict(collapse["evidence"])["share of traces stating a belief"]
    assert re.search(r"\d+\.\d % \[.*\] \(n=\d+\)", belief)  # counted with the fidelity parser, with n and interval
    assert collapse["data"]["belief_change"]["high"] < 0
    divergence = by_name(out, "id_ood_divergence")[0]
    assert divergence["fired"], divergence["explanation"]
    assert divergence["data"]["ood_first"]["n"] == 30  # order 4 is held out: trained on orders 0-3
    assert divergence["data"]["id_first"]["n"] == 120
    entropy = by_name(out, "entropy_collapse")[0]
    assert entropy["fired"] and entropy["data"]["entropy_relative_change"] < -0.5, entropy["explanation"]
    shares = collapse["data"]["context_shares"]
    for label in ("share of rollouts naming every asked agent", "share of rollouts with a self-reflection phrase"):
        assert shares[label]["early"]["value"] > 0.9 and shares[label]["change"]["high"] < 0, label
        assert label in dict(collapse["evidence"])
    assert (out / "collapse-1-rl-small.png").exists()
    markdown = (out / "report.md").read_text()
    assert "Entropy collapse — rl-small: FIRED" in markdown and "The asked agents come from: meta.query.chain" in markdown
    assert main(["report", str(collapsed_run), "--out", str(tmp_path / "ci"), "--fail-on-detection"]) == 1


def test_report_on_a_healthy_run_fires_nothing(tmp_path):
    from analysis_run_folders import write_training_run

    write_training_run(
        tmp_path / "runs" / "rl-7b-like",
        length=lambda s: 420.0,
        reward=lambda s: -1.0 + s / 60,
        accuracy=lambda s, in_distribution: 0.3 + 0.4 * s / 118,  # held-out orders improve as much
        belief_share=lambda s: 0.9,
    )
    out = tmp_path / "report"
    assert main(["report", str(tmp_path / "runs"), "--out", str(out), "--fail-on-detection"]) == 0
    assert not by_name(out, "reasoning_collapse")[0]["fired"]
    assert by_name(out, "entropy_collapse")[0]["verdict"] == "not fired"  # entropy 1.2 → 0.96: less than half gone
    divergence = by_name(out, "id_ood_divergence")[0]
    assert not divergence["fired"] and divergence["verdict"] in ("not fired", "partial transfer")


def test_shorter_but_still_reasoning_is_not_collapse(tmp_path):
    from analysis_run_folders import collapsing, write_training_run

    write_training_run(tmp_path / "run", length=collapsing, reward=lambda s: -2.0 + s / 30, belief_share=lambda s: 0.85)
    out = tmp_path / "report"
    main(["report", str(tmp_path / "run"), "--out", str(out)])
    collapse = by_name(out, "reasoning_collapse")[0]
    assert not collapse["fired"] and collapse["verdict"] == "shorter, still reasoning"


@pytest.fixture(scope="module")
def before_after(tmp_path_factory):
    """A base model and an RL model trained on Hi-ToM orders 0-3: inverted difficulty after training,
    a drop on a task outside the mixture, and Paper A's columns."""
    from analysis_run_folders import write_evaluation, write_training_run

    root = tmp_path_factory.mktemp("before_after")
    run = write_training_run(root / "rl-hitom")
    base = {0: 0.5, 1: 0.3, 2: 0.25, 3: 0.2, 4: 0.25}
    trained = {0: 0.5, 1: 0.7, 2: 0.7, 3: 0.85, 4: 0.85}
    write_evaluation(root / "eval-base", "smollm2-135m", {"hitom600": base, "tomi": {0: 0.6, 1: 0.5}}, heldout_n=60)
    write_evaluation(root / "eval-rl", str(run / "final"), {"hitom600": trained, "tomi": {0: 0.3, 1: 0.25}}, heldout_n=60)
    return root


def test_before_after_report(before_after, tmp_path):
    out = tmp_path / "report"
    assert main(["report", str(before_after), "--out", str(out)]) == 0
    inverted = {d["subject"]: d for d in by_name(out, "inverted_difficulty")}
    assert inverted["after: rl-hitom on hitom600"]["fired"]
    assert not inverted["before: smollm2-135m on hitom600"]["fired"]
    transfer = by_name(out, "negative_transfer")[0]
    assert transfer["fired"]
    dropped = {(c["task"]) for c in transfer["data"]["comparisons"] if c["significant_drop"]}
    assert dropped == {"tomi"}  # hitom600 orders 0-3 are in distribution; order 4 rose
    markdown = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    for text in ("Paper A: 0.5B + RL", "70.83 %", "after: rl-hitom — strict", "before: smollm2-135m — Paper A's scoring",
                 "hitom600 · order 4", "(ID)", "Inverted difficulty — after: rl-hitom on hitom600: FIRED"):
        assert text in markdown and text in html.replace("&#x27;", "'"), text
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert {"generalization-matrix.png", "orders-hitom600.png"} <= set(pngs)
    assert all(f"({name})" in markdown for name in pngs)  # Markdown links every PNG …
    assert html.count("data:image/png;base64,") == len(pngs)  # … HTML embeds every one


def test_report_without_trained_model_has_no_transfer_section(tmp_path):
    from analysis_run_folders import write_evaluation

    write_evaluation(tmp_path / "eval", "smollm2-135m", {"hitom600": {0: 0.5, 1: 0.5}}, heldout_n=20)
    written = write_report(load_runs([tmp_path]), tmp_path / "out", default_options())
    assert "Generalization" not in written["markdown"].read_text()


def test_user_errors_exit_2_with_the_file_named(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert "no such folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty")]) == 2
    assert "no runs found" in capsys.readouterr().err
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "metrics.jsonl").write_text('{"step": 1, "reward": 0.5}\n{"step": "two"}\n')
    assert main(["report", str(broken)]) == 2
    err = capsys.readouterr().err
    assert "metrics.jsonl:2: field 'step'" in err
    assert not (broken / "report").exists()
    assert main(["report", str(tmp_path / "empty"), str(broken)]) == 2
    assert "--out" in capsys.readouterr().err


def test_shortcut_comparison_finds_a_model_that_answers_the_last_container(tmp_path):
    from analysis_run_folders import write_evaluation, write_training_run

    from tomrl.audit.heuristics import HEURISTICS
    from tomrl.rewards.answer import answers_match
    from tomrl.rewards.fidelity import world_from_story

    def other_wrong(example, avoid):
        containers = world_from_story(example.story, "hitom").containers
        return next((c for c in containers if c not in avoid), "blue_envelope")

    def base_answer(example, correct):
        choice = example.answer if correct else other_wrong(example, {example.answer, HEURISTICS["last_mentioned"](example)})
        return f"Anna thinks so.</think><answer>{choice}</answer>"

    def shortcut_answer(example, correct):
        last = HEURISTICS["last_mentioned"](example)
        choice = example.answer if correct or answers_match(last, example.answer) else last
        return f"The end.</think><answer>{choice}</answer>"

    run = write_training_run(tmp_path / "rl")
    orders = {f"tomrl-hitom-order{k}": {k: 0.4} for k in (1, 2, 3)}
    write_evaluation(tmp_path / "base", "smollm2-135m", orders, answer=base_answer, heldout_n=40)
    write_evaluation(tmp_path / "after", str(run / "final"), orders, answer=shortcut_answer, heldout_n=40)
    out = tmp_path / "report"
    assert main(["report", str(tmp_path), "--out", str(out)]) == 0
    markdown = (out / "report.md").read_text()
    section = markdown.split("## Shortcuts")[1].split("\n## ")[0]
    change_rows = [line for line in section.splitlines() if line.startswith("| last_mentioned |") and "pts" in line]
    assert change_rows, section
    change = re.search(r"\+(\d+\.\d) pts \[\+(\d+\.\d)", change_rows[0])
    assert change and float(change.group(2)) > 0  # agreement with the wrong last container rose significantly
    assert "tomrl-hitom-order*" in markdown  # the per-order held-out sets are joined for the order plot
    traces = markdown.split("## Traces side by side")[1].split("\n## ")[0]
    assert traces.count("\n#### tomrl-hitom-order") == 6
    assert "**before: smollm2-135m [base]** —" in traces and "**after: rl [after]** —" in traces


def test_transfer_is_not_measured_against_another_models_evaluation(tmp_path):
    from analysis_run_folders import write_evaluation, write_training_run

    run = write_training_run(tmp_path / "rl", steps=range(0, 20, 2), validation_steps=(0, 18))  # base: smollm2-135m
    write_evaluation(tmp_path / "other-base", "Qwen/Qwen2.5-0.5B-Instruct", {"tomi": {0: 0.9}}, heldout_n=20)
    write_evaluation(tmp_path / "after", str(run / "final"), {"tomi": {0: 0.1}}, heldout_n=20)
    out = tmp_path / "report"
    main(["report", str(tmp_path), "--out", str(out)])
    transfer = by_name(out, "negative_transfer")[0]
    assert transfer["verdict"] == "not enough data" and "smollm2-135m" in transfer["explanation"]


def test_other_analyses_sections_are_added_when_their_files_exist(tmp_path, monkeypatch):
    import tomrl.analysis.interventions as interventions
    import tomrl.analysis.probes as probes
    from analysis_run_folders import write_evaluation

    from tomrl.analysis.document import Paragraph, Section

    write_evaluation(tmp_path / "runs" / "eval", "smollm2-135m", {"hitom600": {0: 0.5, 1: 0.5}}, heldout_n=10)
    (tmp_path / "runs" / "analysis").mkdir()
    (tmp_path / "runs" / "analysis" / "interventions.json").write_text("{}")
    (tmp_path / "runs" / "analysis" / "probes.json").write_text("{}")
    seen = {}

    def sections(files, out_dir):
        seen["files"], seen["out"] = files, out_dir
        return [Section("Trace interventions (planted)", [Paragraph("planted paragraph")])]

    monkeypatch.setattr(interventions, "report_sections", sections, raising=False)
    monkeypatch.delattr(probes, "report_sections", raising=False)
    out = tmp_path / "report"
    assert main(["report", str(tmp_path / "runs"), "--out", str(out)]) == 0
    markdown = (out / "report.md").read_text()
    assert "## Trace interventions (planted)" in markdown and "planted paragraph" in (out / "report.html").read_text()
    assert [f.name for f in seen["files"]] == ["interventions.json"] and seen["out"] == out
    assert "1 probes.json file(s) found, but tomrl.analysis.probes has no report_sections yet" in markdown
