"""`tomrl demo` runs every stage end to end (on the 2-layer model) and resumes a finished run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def test_quick_demo_runs_every_stage_and_writes_the_report(tmp_path, shared_data):
    out = tmp_path / "demo"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "tomrl", "demo", "--config", str(CONFIGS / "demo" / "quick.yaml"), f"out_dir={out}"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for stage in range(1, 8):
        assert f"tomrl demo · {stage}/7" in result.stdout
    assert (out / "train" / "data" / "train.jsonl").exists() and (out / "audit.md").exists()
    sets = {"dev", "neutral", "neutral-orders3-4", "pairs", "swap", "hitom600"}
    assert {p.stem for p in (out / "eval_sets").glob("*.jsonl")} == sets
    for which in ("base", "rl"):  # the smoke config has no warm start
        results = json.dumps(json.loads((out / "eval" / which / "results.json").read_text()))
        assert all(f"file-{name}" in results for name in sets)
    comparison = json.loads((out / "comparison.json").read_text())
    assert comparison["models"] == ["base", "RL"]
    rows = {(row["set"], row["group"]) for row in comparison["rows"]}
    assert {("neutral", "order 2"), ("pairs", "pairs"), ("swap", "pairs"), ("hitom600", "all")} <= rows
    assert all(row["rule_accuracy"] is not None for row in comparison["rows"] if row["set"] != "dev" or row["group"] == "all")
    report = (out / "report" / "report.html").read_text()
    assert "<html" in report.lower() and (out / "report" / "report.md").exists() and "Models beside the best no-ToM rule" in report
    assert "best no-ToM rule" in (out / "comparison.md").read_text() and "base → RL" in (out / "comparison.md").read_text()
    swap_pairs = next(row for row in comparison["rows"] if row["set"] == "swap" and row["unit"] == "pair")
    assert swap_pairs["rule_accuracy"]["k"] == 0 and swap_pairs["beats_rule"] == []  # 0 of 3 pairs does not beat 0 %
    # Started again, the demo reuses every finished stage instead of redoing it.
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "training already finished" in again.stdout


def test_benchmarks_without_data_are_skipped_with_a_note(tmp_path, monkeypatch, capsys):
    from rich.console import Console

    from tomrl.demo import available_benchmarks

    monkeypatch.setenv("TOMRL_DATA", str(tmp_path))  # an empty data folder
    console = Console(file=None)
    assert available_benchmarks(["hitom600", "tomrl-hitom-order1"], console) == ["tomrl-hitom-order1"]
    assert "skipping hitom600" in capsys.readouterr().out


def test_default_demo_config_file_spells_out_the_defaults():
    """configs/demo/default.yaml documents what `make demo` runs: it must equal DemoConfig's defaults."""
    from pathlib import Path

    from tomrl.config import load_config
    from tomrl.demo import DemoConfig

    shipped = Path(__file__).resolve().parents[1] / "configs" / "demo" / "default.yaml"
    assert load_config(DemoConfig, shipped, []) == load_config(DemoConfig, None, [])
