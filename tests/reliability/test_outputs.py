"""No output ever replaces an input of its command, another of its outputs, or another command's folder.

Every case the probes of issue 27 found, through the real CLI (``tomrl.cli.main``): exit code 2, one
error line naming the flag and both paths, and not one byte written (the test folder's files and their
sha256 are the same before and after). The guard itself is :mod:`tomrl.outputs`.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from reliability_helpers import REPO_ROOT, one_error

from tomrl.cli import main
from tomrl.outputs import (
    FOLDER_KINDS,
    MARKER_FILE,
    OutputClashError,
    check_folder,
    check_outputs,
    claim_folder,
    folder_kind,
    same_path,
)

STUDY_SMOKE = str(REPO_ROOT / "configs" / "study" / "smoke.yaml")


def _snapshot(root: Path) -> dict[str, str]:
    """Every file and folder under ``root`` (hidden ones too), files with their sha256."""
    return {
        str(path.relative_to(root)): f"link to {os.readlink(path)}" if path.is_symlink() else "folder" if path.is_dir()
        else hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
    }


def _refused(argv: list[str], root: Path, capsys) -> str:
    """Run ``tomrl ARGV``: exit 2, one error line, nothing under ``root`` changed. Returns the line."""
    capsys.readouterr()
    before = _snapshot(root)
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert _snapshot(root) == before, "a refused command wrote or changed files"
    return one_error(err)


@pytest.fixture(scope="module")
def hitom20(tmp_path_factory) -> bytes:
    """A small generated data file (20 Hi-ToM questions), made once through the CLI."""
    path = tmp_path_factory.mktemp("data") / "hitom20.jsonl"
    assert main(["data", "generate", "hitom", "--n", "20", "--seed", "0", "--out", str(path)]) == 0
    return path.read_bytes()


@pytest.fixture
def work(tmp_path, hitom20, monkeypatch) -> Path:
    """A working folder holding data.jsonl (the 20 questions) and gen.yaml (a generator config)."""
    (tmp_path / "data.jsonl").write_bytes(hitom20)
    (tmp_path / "gen.yaml").write_text("benchmark: hitom\nn: 4\norders: [0, 1]\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


# ----------------------------------------------------------------------------- an output onto an input file

# name -> (argv with OUT for the output and IN for the input, the output's flag, the input's flag, the input)
FILE_CASES = {
    "data audit --json onto its --test": (["data", "audit", "--test", "IN", "--json", "OUT"], "--json", "--test", "data.jsonl"),
    "data verify --json onto its input": (["data", "verify", "IN", "--json", "OUT"], "--json", "BENCHMARK", "data.jsonl"),
    "data generate --out onto its --exclude": (["data", "generate", "hitom", "--n", "5", "--exclude", "IN", "--out", "OUT"],
                                               "--out", "--exclude", "data.jsonl"),
    "data load --out onto its --path": (["data", "load", "jsonl", "--path", "IN", "--out", "OUT"], "--out", "--path", "data.jsonl"),
    "data check --out onto its input": (["data", "check", "IN", "--out", "OUT"], "--out", "FILE", "data.jsonl"),
    "reward score --out onto its --input": (["reward", "score", "--reward", "strict", "--input", "IN", "--out", "OUT"],
                                            "--out", "--input", "data.jsonl"),
    "data neutrality --json onto its --config": (["data", "neutrality", "--config", "IN", "--seeds", "1,2", "--json", "OUT"],
                                                 "--json", "--config", "gen.yaml"),
}


def _output_shaped(shape: str, source: str, work: Path) -> str:
    """A path naming the file ``source`` in the way ``shape`` says."""
    if shape == "same path":
        return source
    if shape == "another spelling":
        (work / "sub").mkdir()
        return f"./sub/../{source}"
    if shape == "absolute":
        return str(work / source)
    if shape == "symlink":
        os.symlink(source, work / "link")
        return "link"
    if shape == "symlinked folder":
        os.symlink(".", work / "here")
        return f"here/{source}"
    assert shape == "hard link"
    os.link(work / source, work / "hard")
    return "hard"


@pytest.mark.parametrize("shape", ["same path", "another spelling", "absolute", "symlink", "symlinked folder", "hard link"])
@pytest.mark.parametrize("case", sorted(FILE_CASES))
def test_an_output_onto_an_input_is_refused_before_any_write(case, shape, work, capsys):
    argv, out_flag, in_flag, source = FILE_CASES[case]
    out = _output_shaped(shape, source, work)
    argv = [out if item == "OUT" else source if item == "IN" else item for item in argv]
    line = _refused(argv, work, capsys)
    assert f"{out_flag} {out} is also this command's input ({in_flag} {source})" in line, line
    assert f"choose another {out_flag}" in line


def test_two_outputs_of_one_command_onto_one_file_are_refused(work, capsys):
    line = _refused(["data", "audit", "--test", "data.jsonl", "--json", "report", "--markdown", "./report"], work, capsys)
    assert "--json report and --markdown ./report are the same file" in line and "different paths" in line
    os.symlink("report.md", work / "r.json")
    line = _refused(["data", "audit", "--test", "data.jsonl", "--json", "r.json", "--markdown", "report.md"], work, capsys)
    assert "--json r.json and --markdown report.md are the same file" in line


def test_an_output_inside_an_input_data_folder_is_refused(work, capsys):
    folder = work / "release"
    folder.mkdir()
    (folder / "data.jsonl").write_bytes((work / "data.jsonl").read_bytes())
    line = _refused(["data", "load", "jsonl", "--path", "release", "--out", "release/converted.jsonl"], work, capsys)
    assert "--out release/converted.jsonl is inside the --path data folder release" in line


@pytest.mark.parametrize("argv", [
    ["data", "check", "data.jsonl", "--out", ""],
    ["data", "generate", "hitom", "--n", "2", "--out", ""],
    ["data", "audit", "--test", "data.jsonl", "--json", ""],
    ["reward", "score", "--reward", "strict", "--input", "data.jsonl", "--out", ""],
    ["eval", "--model", "smollm2-135m", "--benchmark", "data.jsonl", "--out", ""],
    ["study", "--config", STUDY_SMOKE, "out_dir=''"],
    ["demo", "out_dir=''"],
    ["report", "runs", "--out", ""],
    ["analyze", "interventions", "--model", "a=smollm2-135m", "--data", "data.jsonl", "--out", ""],
    ["analyze", "probes", "--model", "a=smollm2-135m", "--data", "data.jsonl", "--out", ""],
], ids=lambda argv: " ".join(argv[:2]))
def test_an_empty_output_path_is_an_error_not_the_working_folder(argv, work, capsys):
    line = _refused(argv, work, capsys)
    flag = argv[argv.index("") - 1] if "" in argv else "out_dir"  # the flag given the empty path
    assert line == f"tomrl: error: {flag} is empty: give a path (an empty one would mean the working folder)", line


# ----------------------------------------------------------------------------- folders of other commands


def _make_folder(kind: str, folder: Path) -> None:
    """A folder of ``kind`` as the command leaves it, cheaply: the files it is recognised by."""
    folder.mkdir(parents=True)
    if kind == "train":
        (folder / "data").mkdir()
        (folder / "data" / "train.jsonl").write_text("{}\n")
        (folder / "config.yaml").write_text("model: tiny-qwen2\nseed: 0\n")
    elif kind == "eval":
        (folder / "run.json").write_text(json.dumps({"generation": {"model": "m", "seed": 0}, "benchmark_versions": {"x": 1}}))
        (folder / "samples.jsonl").write_text('{"benchmark": "x", "id": "1"}\n')
    elif kind == "demo":
        (folder / "eval_sets").mkdir()
        (folder / "audit.json").write_text(json.dumps({"seed": 0}))
        (folder / "report").mkdir()
        (folder / "report" / "report.html").write_text("<html></html>")
        (folder / "report" / "report.md").write_text("# demo\n")
    elif kind == "study":
        for name in ("study.yaml", "train_base.yaml"):
            (folder / name).write_text("name: s\n")
        (folder / "grid.json").write_text(json.dumps({"cells": []}))
    elif kind == "analyze-interventions":
        (folder / "run.json").write_text(json.dumps({"settings": {"seed": 0}, "models": {"a": "m"}}))
    elif kind == "report":
        (folder / "report.html").write_text("<html></html>")
        (folder / "report.md").write_text("# r\n")
    elif kind == "marked train":  # a folder known only by its marker
        (folder / MARKER_FILE).write_text(json.dumps({"kind": "train", "created_by": "tomrl train"}))
    else:
        raise AssertionError(kind)


# verb -> (its folder kind, argv with OUT for the folder)
FOLDER_VERBS = {
    "train": ("train", ["train", "--config", str(REPO_ROOT / "configs" / "train" / "smoke_cpu.yaml"), "run_dir=OUT"]),
    "study": ("study", ["study", "--config", STUDY_SMOKE, "out_dir=OUT"]),
    "eval": ("eval", ["eval", "--model", "smollm2-135m", "--benchmark", "data.jsonl", "--out", "OUT"]),
    "demo": ("demo", ["demo", "out_dir=OUT"]),
    "analyze interventions": ("analyze-interventions",
                              ["analyze", "interventions", "--model", "a=smollm2-135m", "--data", "data.jsonl", "--out", "OUT"]),
    "analyze probes": ("analyze-probes", ["analyze", "probes", "--model", "a=smollm2-135m", "--data", "data.jsonl", "--out", "OUT"]),
    "report": ("report", ["report", "runs", "--out", "OUT"]),
    "export verl": ("export-verl", ["export", "verl", "--config", str(REPO_ROOT / "configs" / "train" / "smoke_cpu.yaml"), "--out", "OUT"]),
}
FOREIGN = ["train", "eval", "demo", "study", "analyze-interventions", "report", "marked train"]


# Every verb against every other kind (its own kind is resumed, or refused by the verb's settings check).
CLASHES = [(verb, foreign) for verb in sorted(FOLDER_VERBS) for foreign in FOREIGN if foreign.removeprefix("marked ") != FOLDER_VERBS[verb][0]]


@pytest.mark.parametrize("verb, foreign", CLASHES)
def test_a_folder_another_command_made_is_refused_before_any_write(verb, foreign, work, capsys):
    kind, argv = FOLDER_VERBS[verb]
    _make_folder(foreign, work / "theirs")
    line = _refused([item.replace("OUT", "theirs") for item in argv], work, capsys)
    key = "out_dir" if "out_dir=OUT" in argv else "run_dir" if "run_dir=OUT" in argv else "--out"
    made_by = FOLDER_KINDS[foreign.removeprefix("marked ")]
    assert line.startswith(f"tomrl: error: {key} theirs is a folder of `{made_by}` (theirs/"), line
    assert f"`{FOLDER_KINDS[kind]}` would mix its files into it: choose another {key}" in line


@pytest.mark.parametrize("verb", sorted(FOLDER_VERBS))
def test_a_file_where_the_output_folder_goes_is_refused(verb, work, capsys):
    _, argv = FOLDER_VERBS[verb]
    line = _refused([item.replace("OUT", "data.jsonl") for item in argv], work, capsys)
    assert "data.jsonl is a file, not a folder" in line or "is also this command's input" in line, line


def test_a_demo_started_with_other_settings_is_refused_before_any_write(work, capsys):
    from tomrl.config import save_config
    from tomrl.demo import DEMO_FILE, DemoConfig

    _make_folder("demo", work / "legacy")  # made before demo.yaml: its audit.json says seed 0
    line = _refused(["demo", "out_dir=legacy", "seed=1"], work, capsys)
    assert "out_dir legacy holds a demo started with other settings (seed: 0 -> 1)" in line, line
    claim_folder(work / "new", "demo", key="out_dir")
    save_config(DemoConfig(out_dir="new"), work / "new" / DEMO_FILE)
    line = _refused(["demo", "out_dir=new", "seed=1", "eval_limit=3"], work, capsys)
    assert "(eval_limit: 20 -> 3, seed: 0 -> 1); continue it with the settings it was started with (new/demo.yaml)" in line


def test_a_real_eval_folder_is_marked_resumed_and_never_taken_by_another_command(work, capsys, hermetic_home, monkeypatch):
    monkeypatch.setenv("TOMRL_HOME", str(hermetic_home))
    eval_argv = ["eval", "--model", "tiny-qwen2", "--benchmark", "data.jsonl", "--limit", "1", "--out", "ev", "max_new_tokens=2"]
    assert main(eval_argv) == 0, capsys.readouterr().err
    assert json.loads((work / "ev" / MARKER_FILE).read_text()) == {"kind": "eval", "created_by": "tomrl eval"}
    for argv in (["analyze", "interventions", "--model", "a=tiny-qwen2", "--data", "data.jsonl", "--out", "ev"],
                 ["study", "--config", STUDY_SMOKE, "out_dir=ev"],
                 ["demo", "out_dir=ev"]):
        assert "is a folder of `tomrl eval` (ev/.tomrl.json)" in _refused(argv, work, capsys)
    assert main(eval_argv) == 0  # its own command resumes it
    assert "1 already answered" in capsys.readouterr().out


# ----------------------------------------------------------------------------- the guard itself


def test_same_path_follows_symlinks_and_hard_links(tmp_path):
    a = tmp_path / "a"
    a.write_text("x")
    os.symlink(a, tmp_path / "s")
    os.link(a, tmp_path / "h")
    assert same_path(a, tmp_path / "s") and same_path(a, tmp_path / "h") and same_path(a, tmp_path / "." / "a")
    assert not same_path(a, tmp_path / "b")
    assert same_path(tmp_path / "new", tmp_path / "sub" / ".." / "new")  # neither exists yet


def test_outputs_written_through_are_not_clashes(tmp_path):
    check_outputs({"--json": "/dev/null", "--markdown": "/dev/null"}, inputs={"--test": str(tmp_path)})
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    check_outputs({"--json": fifo, "--markdown": fifo})


def test_claim_folder_marks_a_new_folder_and_keeps_its_own_kind(tmp_path):
    folder = claim_folder(tmp_path / "a" / "b", "study", key="out_dir")
    assert json.loads((folder / MARKER_FILE).read_text()) == {"kind": "study", "created_by": "tomrl study"}
    assert folder_kind(folder) == "study" and claim_folder(folder, "study", key="out_dir") == folder
    with pytest.raises(OutputClashError, match=r"^out_dir .* is a folder of `tomrl study`"):
        check_folder(folder, "eval", key="out_dir")
    (folder / MARKER_FILE).write_text('{"kind": "mystery"}')
    with pytest.raises(OutputClashError, match="field 'kind'"):
        folder_kind(folder)
    assert folder_kind(tmp_path / "absent") is None and folder_kind(tmp_path / "a") is None


def test_the_recognised_file_names_are_the_ones_the_commands_write():
    """Folders older than the marker are known by their files; those names live in higher modules."""
    from tomrl import outputs
    from tomrl.loaders.recipes import RECIPE_FOLDER_MARKER
    from tomrl.study.grid import GRID_FILE
    from tomrl.study.runner import STUDY_FILE, TRAIN_BASE_FILE
    from tomrl.training.run import CONFIG_FILE

    assert outputs.TRAIN_FILES[0] == CONFIG_FILE
    assert outputs.STUDY_FILES == ((GRID_FILE,), (STUDY_FILE, TRAIN_BASE_FILE))
    assert outputs.RECIPE_FILES[0] == RECIPE_FOLDER_MARKER
