"""Flags and keys that used to be ignored or to crash silently now fail at once, in one line, naming the fix."""

from __future__ import annotations

import hashlib

import pytest

from tomrl.generators.config import GenerateConfig

from tests.reliability.reliability_helpers import REPO_ROOT, cli_env, one_error, run_cli


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
    (["--seed", "-1"], "--seed: a seed must be between 0 and 4294967295"),
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


# ----------------------------------------------------------------------------- issue 27: the CLI fuzz's findings


def _write_rows(path, examples) -> str:
    from tomrl.io import write_jsonl

    write_jsonl(path, [e.to_dict() for e in examples])
    return str(path)


@pytest.mark.parametrize("verb", ["data audit", "analyze probes"])
@pytest.mark.parametrize("seed", ["-1", str(2**32), str(10**30)])
def test_a_seed_outside_numpy_s_range_is_one_error_naming_the_flag(tmp_path, hermetic_home, generated_examples, verb, seed):
    """``--seed`` goes to sklearn, which takes 0..2**32-1 only: ``data audit --seed -1`` ended in its
    InvalidParameterError traceback; now both verbs check it first (``tomrl.config.check_seed``)."""
    hitom, tomi = generated_examples
    data = _write_rows(tmp_path / "rows.jsonl", hitom + tomi)
    out = tmp_path / "out"
    args = {"data audit": ["data", "audit", "--test", data, "--json", str(out)],
            "analyze probes": ["analyze", "probes", "--model", "tiny-qwen2", "--data", data, "--out", str(out)]}[verb]
    result = run_cli([*args, "--seed", seed], cli_env(hermetic_home), REPO_ROOT, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"--seed: a seed must be between 0 and 4294967295, got {seed}" in one_error(result.stderr)
    assert not out.exists()


def test_the_largest_seed_is_accepted_by_data_audit(tmp_path, hermetic_home, generated_examples):
    hitom, tomi = generated_examples
    data = _write_rows(tmp_path / "rows.jsonl", hitom + tomi)
    out = tmp_path / "audit.json"
    result = run_cli(["data", "audit", "--test", data, "--json", str(out), "--seed", str(2**32 - 1)], cli_env(hermetic_home), REPO_ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert out.exists()


@pytest.mark.parametrize("verb", ["eval", "analyze probes"])
def test_a_multiple_choice_prompt_on_rows_without_choices_is_one_error_before_any_work(tmp_path, hermetic_home, generated_examples, verb):
    """``prompt.style=hitom_mc`` (eval) / ``--prompt-style hitom_mc`` (probes) on ToMi rows, which have no
    choices, ended in a ValueError traceback from tomrl.prompts while the prompts were built; now every selected
    question is checked first: one line naming the file, the example and the setting, and nothing written."""
    _, tomi = generated_examples
    assert all(not e.choices for e in tomi)
    data = _write_rows(tmp_path / "tomi.jsonl", tomi)
    out = tmp_path / "out"
    args, where, key = {
        "eval": (["eval", "--model", "tiny-qwen2", "--benchmark", data, "--limit", "2", "--out", str(out), "prompt.style=hitom_mc"],
                 f"{data}: example '", "prompt.style"),
        "analyze probes": (["analyze", "probes", "--model", "tiny-qwen2", "--data", data, "--out", str(out), "--limit", "4",
                            "--prompt-style", "hitom_mc"], f"{data}:1: ", "--prompt-style"),
    }[verb]
    result = run_cli(args, cli_env(hermetic_home), REPO_ROOT, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    error = one_error(result.stderr)
    assert where in error and "field 'choices': prompt style 'hitom_mc' needs choices" in error, error
    assert f"another prompt style with {key}" in error, error
    assert not out.exists()


def test_building_a_multiple_choice_prompt_without_usable_choices_is_bad_input(generated_examples):
    """Where no caller checked first (training data), the prompt builder's own error is tomrl's one-line kind."""
    from tomrl.io import BadInputError
    from tomrl.prompts import build_messages

    hitom, tomi = generated_examples
    assert hitom[0].choices and "Choices: A. " in build_messages(hitom[0], "hitom_mc")[0]["content"]
    with pytest.raises(BadInputError, match=rf"example '{tomi[0].id}': field 'choices': .* needs choices, and this example has none"):
        build_messages(tomi[0], "hitom_mc")
    too_many = hitom[0].replace(choices=[f"box_{i}" for i in range(27)])
    with pytest.raises(BadInputError, match="at most 26"):
        build_messages(too_many, "hitom_mc")


@pytest.mark.parametrize("args, message", [
    (["report", "--study", ""], "--study: an empty path"),
    (["report", "--study", " "], "--study: an empty path"),
    (["report", ""], "RUN_DIR: an empty path"),
])
def test_report_on_an_empty_path_is_one_error_naming_the_argument(tmp_path, hermetic_home, args, message):
    """``tomrl report --study ''`` read the working folder (``.: no grid.json``), ``tomrl report ''`` searched it."""
    result = run_cli(args, cli_env(hermetic_home), tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert message in one_error(result.stderr)
    assert list(tmp_path.iterdir()) == []
