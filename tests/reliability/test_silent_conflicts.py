"""Flags and keys that used to be ignored or to crash silently now fail at once, in one line, naming the fix."""

from __future__ import annotations

import hashlib

import pytest

from tomrl.generators.config import GenerateConfig

from tests.reliability.reliability_helpers import REPO_ROOT, cli_env, run_cli


@pytest.mark.parametrize(
    "args, message",
    [
        (["data", "generate", "tomi", "--n", "10", "--orders", "3"], "orders=[3] applies to Hi-ToM only"),
        (["data", "generate", "hitom", "--n", "10", "split_fractions={train: .nan, test: 1.0}"], "finite fractions"),
    ],
)
def test_generate_refuses_keys_it_would_ignore_or_crash_on(tmp_path, hermetic_home, args, message):
    out = tmp_path / "out.jsonl"
    result = run_cli([*args, "--out", str(out)], cli_env(hermetic_home), REPO_ROOT, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()


def test_tomi_keeps_its_question_types_and_the_default_orders():
    assert GenerateConfig(benchmark="tomi", n=4).orders == [0, 1, 2, 3, 4]  # the default is not a request


def test_two_benchmark_files_with_one_name_are_refused(tmp_path, hermetic_home):
    env = cli_env(hermetic_home)
    files = []
    for folder, seed in (("a", 1), ("b", 2)):
        path = tmp_path / folder / "x.jsonl"
        path.parent.mkdir()
        assert run_cli(["data", "generate", "hitom", "--n", "4", "--seed", str(seed), "--out", str(path)], env, REPO_ROOT).returncode == 0
        files.append(path)
    before = [hashlib.sha256(f.read_bytes()).hexdigest() for f in files]
    result = run_cli(["eval", "--model", "tiny-qwen2", "--benchmark", str(files[0]), "--benchmark", str(files[1]),
                      "--out", str(tmp_path / "eval")], env, REPO_ROOT, timeout=120)
    assert result.returncode == 2 and "would both be named file-x" in result.stderr, result.stderr[-2000:]
    assert [hashlib.sha256(f.read_bytes()).hexdigest() for f in files] == before and not (tmp_path / "eval").exists()


def test_verify_with_every_row_skipped_fails(tmp_path, hermetic_home):
    data = tmp_path / "bad.jsonl"
    data.write_text('{"bad": 1}\n{"x": 2}\n')
    result = run_cli(["data", "verify", str(data), "--skip-bad"], cli_env(hermetic_home), REPO_ROOT, timeout=120)
    assert result.returncode == 1 and "nothing verified" in result.stdout, result.stdout[-2000:]


def test_eval_flags_that_disagree_or_name_the_wrong_file_fail_in_one_line(tmp_path, hermetic_home):
    env = cli_env(hermetic_home)
    data = tmp_path / "g.jsonl"
    assert run_cli(["data", "generate", "hitom", "--n", "4", "--out", str(data)], env, REPO_ROOT).returncode == 0
    cases = [
        (["eval", "--model", "tiny-qwen2", "--benchmark", str(data), "--greedy", "temperature=0.9", "--out", str(tmp_path / "e")],
         "--greedy and temperature=0.9 disagree"),
        (["eval", "--table", str(data)], "is not a tomrl eval results.json"),
    ]
    for args, message in cases:
        result = run_cli(args, env, REPO_ROOT, timeout=120)
        assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert not (tmp_path / "e").exists()


@pytest.mark.parametrize("flag, message", [
    (["--seed", "-1"], "--seed must be >= 0"),
    (["--batch-size", "0"], "--batch-size must be >= 1"),
    (["--threads", "-1"], "--threads must be >= 1"),
    (["--device", "cuda"], "cuda asked for, but this machine has 0 CUDA GPUs"),
])
def test_analyze_flags_are_checked_before_any_model_loads(tmp_path, hermetic_home, flag, message):
    import torch

    if "cuda" in flag and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    env = cli_env(hermetic_home)
    data = tmp_path / "g.jsonl"
    assert run_cli(["data", "generate", "hitom", "--n", "4", "--out", str(data)], env, REPO_ROOT).returncode == 0
    out = tmp_path / "an"
    result = run_cli(["analyze", "interventions", "--model", "a=tiny-qwen2", "--data", str(data), "--out", str(out), *flag], env, REPO_ROOT, timeout=120)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert not out.exists()
