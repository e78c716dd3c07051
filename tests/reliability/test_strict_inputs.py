"""Inputs that used to pass silently or crash a reader: duplicate keys, huge lines, deep nesting,
contradictory orders, unparseable stories.

Every reader goes through :mod:`tomrl.io` (``scan_jsonl``, ``loads_json``) or
:func:`tomrl.config.yaml_safe_load`, which refuse a key given twice (the first value would be lost),
a line over ``MAX_LINE_BYTES`` (checked while reading, before parsing) and nesting too deep to
parse (``'[' * 100000``: a RecursionError) with one error naming the file and line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from reliability_helpers import cli_env, one_error, run_cli

from tomrl.cli import main
from tomrl.config import ConfigError, load_config, read_yaml
from tomrl.io import MAX_LINE_BYTES, BadInputError, iter_jsonl, scan_jsonl, write_jsonl
from tomrl.schema import read_examples
from tomrl.training.config import TrainConfig


@pytest.fixture
def good_rows(generated_examples):
    hitom, _ = generated_examples
    return [e.to_dict() for e in hitom]


def test_a_duplicate_json_key_is_an_error_naming_the_line(tmp_path, good_rows, capsys):
    path = tmp_path / "dup.jsonl"
    write_jsonl(path, good_rows)
    lines = path.read_text().splitlines()
    lines[1] = lines[1][:-1] + ', "answer": "somewhere_else"}'
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(BadInputError, match=r"dup.jsonl:2: duplicate key 'answer'"):
        read_examples(path)
    assert main(["data", "check", str(path)]) == 2
    assert "duplicate key 'answer'" in one_error(capsys.readouterr().err)


def test_a_duplicate_yaml_key_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "train.yaml"
    path.write_text("learning_rate: 1.0e-6\nmax_steps: 3\nlearning_rate: 1.0\n")
    with pytest.raises(ConfigError, match="duplicate key 'learning_rate'"):
        read_yaml(path)
    with pytest.raises(ConfigError, match="duplicate key 'rank'"):
        load_config(TrainConfig, None, ["lora={rank: 4, rank: 8}"])


def test_a_50_mb_line_is_refused_while_reading(tmp_path, good_rows, hermetic_home):
    path = tmp_path / "huge.jsonl"
    row = dict(good_rows[0], story="x " * (25 * 2**20))
    write_jsonl(path, [good_rows[1], row, good_rows[2]])
    started = time.perf_counter()
    with pytest.raises(BadInputError, match=rf"huge.jsonl:2: line longer than {MAX_LINE_BYTES // 2**20} MB"):
        read_examples(path)
    assert time.perf_counter() - started < 10
    # The CLI: one error, in seconds, without holding the line in memory several times over. The
    # child is started by a small launcher: a child's ru_maxrss starts from the RSS of the process
    # that forked it (it survives exec), so measured straight from this pytest process it would
    # count pytest's own memory (1.5 GB late in a full run).
    launcher = (
        "import resource, subprocess, sys; "
        "code = subprocess.run([sys.executable, '-m', 'tomrl', 'data', 'check', sys.argv[1]], "
        "stdout=subprocess.DEVNULL, stderr=sys.stderr).returncode; "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
        "sys.exit(code)"
    )
    started = time.perf_counter()
    process = subprocess.run(
        [sys.executable, "-c", launcher, str(path)], env=cli_env(hermetic_home), cwd=tmp_path,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=120,
    )
    *messages, peak_kb = process.stderr.strip().splitlines()
    assert process.returncode == 2 and "line longer than" in one_error("\n".join(messages) + "\n")
    assert time.perf_counter() - started < 30
    peak_mb = int(peak_kb) / 1024
    assert peak_mb < 250, f"{peak_mb:.0f} MB"  # ~75 MB when the line is read in bounded pieces


def test_the_rows_after_a_huge_line_are_still_read_with_skip_bad(tmp_path, good_rows):
    path = tmp_path / "huge.jsonl"
    write_jsonl(path, [good_rows[0], dict(good_rows[1], story="y" * (MAX_LINE_BYTES + 10)), good_rows[2]])
    rows = [(index, error) for index, _, error in scan_jsonl(path)]
    assert [index for index, _ in rows] == [1, 2, 3] and rows[1][1] and not rows[0][1] and not rows[2][1]


DEEP = "[" * 100_000


def test_deeply_nested_json_in_a_jsonl_line(tmp_path, capsys):
    path = tmp_path / "deep.jsonl"
    path.write_text(DEEP + "\n")
    with pytest.raises(BadInputError, match="deep.jsonl:1: JSON nested too deeply"):
        list(iter_jsonl(path))
    assert main(["data", "check", str(path)]) == 2
    one_error(capsys.readouterr().err)


def test_deeply_nested_json_in_a_json_data_file(tmp_path, capsys):
    path = tmp_path / "deep.json"
    path.write_text(DEEP)
    assert main(["data", "load", "hitom", "--path", str(path), "--out", str(tmp_path / "out.jsonl")]) == 2
    assert "nested too deeply" in one_error(capsys.readouterr().err)


def test_deeply_nested_yaml_config_and_override(tmp_path, capsys):
    path = tmp_path / "deep.yaml"
    path.write_text("a: " + DEEP)
    assert main(["train", "--config", str(path), f"run_dir={tmp_path / 'run'}"]) == 2
    assert "nested too deeply" in one_error(capsys.readouterr().err)
    assert main(["eval", "--model", "tiny-qwen2", f"data_paths={DEEP}"]) == 2
    assert "nested too deeply" in one_error(capsys.readouterr().err)


def test_deeply_nested_results_json_for_the_table_and_the_report(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_text(DEEP)
    assert main(["eval", "--table", str(run)]) == 2
    one_error(capsys.readouterr().err)
    assert main(["report", str(run), "--out", str(tmp_path / "report")]) == 2
    one_error(capsys.readouterr().err)


def test_an_order_contradicting_its_question_type_is_refused(tmp_path, good_rows, capsys):
    path = tmp_path / "order.jsonl"
    write_jsonl(path, [dict(good_rows[0], question_type="third_order", order=99)])
    with pytest.raises(BadInputError, match=r"order.jsonl:1: field 'order': 99 contradicts question_type 'third_order' \(order 3\)"):
        read_examples(path)


def test_verify_names_file_line_and_field_of_an_unparseable_sentence(tmp_path, good_rows, capsys):
    path = tmp_path / "gibberish.jsonl"
    bad = dict(good_rows[1], story=good_rows[1]["story"].replace(".", " and then the moon sang.", 1))
    write_jsonl(path, [good_rows[0], bad, good_rows[2]])
    assert main(["data", "verify", str(path)]) == 2
    line = one_error(capsys.readouterr().err)
    assert "gibberish.jsonl:2: field 'story': story sentence" in line
    assert main(["data", "verify", str(path), "--skip-bad"]) == 0
    assert "skipped 1 bad lines" in capsys.readouterr().out


def test_an_eval_rerun_with_fewer_benchmarks_keeps_the_others(tmp_path, hermetic_home):
    env = cli_env(hermetic_home)
    out = tmp_path / "run"
    common = ["--limit", "2", "--greedy", "--out", str(out), "heldout_n=2", "max_new_tokens=8"]
    first = run_cli(["eval", "--model", "tiny-qwen2", "--benchmark", "tomrl-hitom-order0,tomrl-hitom-order1", *common], env, tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    again = run_cli(["eval", "--model", "tiny-qwen2", "--benchmark", "tomrl-hitom-order0", *common], env, tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "also keeps 1 benchmarks evaluated earlier in this folder and not asked for now: tomrl-hitom-order1" in again.stdout
    results = json.loads((out / "results.json").read_text())
    assert set(results["benchmarks"]) == {"tomrl-hitom-order0", "tomrl-hitom-order1"}
    assert results["kept_from_earlier_runs"] == ["tomrl-hitom-order1"]
    assert results["benchmarks"]["tomrl-hitom-order1"]["n_answered"] == 2
