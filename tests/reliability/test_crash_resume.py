"""Crashes: SIGKILL and Ctrl-C at random points, then resume; nothing lost, nothing redone, nothing corrupt.

- Atomic files and folders: a child process rewrites a 2 MB file / a checkpoint-like folder in a
  loop and is SIGKILLed at random moments; the target is always absent or complete, never torn. The
  folder swap is also cut at each of its renames (deterministic kill points) and recovered the way
  ``tomrl train --resume`` recovers a run folder; so are a recipe folder and the data a training
  run freezes (cut between their files), and the per-step logs a resume truncates.
- ``tomrl eval``: SIGKILLed after a random number of answers (a torn half line appended, as a crash
  mid-write leaves), then run again: every answer written before the kill is kept byte for byte,
  none is generated twice, none is missing. Ctrl-C stops it cleanly.
- ``tomrl train`` (slow): SIGKILLed at random points (possibly again while resuming), resumed with
  ``tomrl train --resume``: the same steps and the same data order (and the same rollouts) as an
  uninterrupted run; a watcher checks every checkpoint the moment it appears under its final name.
  Ctrl-C stops it with a message saying how to resume.

Kill points are drawn from ``TOMRL_KILL_SEED`` (random when unset); every failure message prints
the seed, so ``TOMRL_KILL_SEED=<seed> pytest tests/reliability/test_crash_resume.py`` replays it.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from reliability_helpers import REPO_ROOT, cli_env, complete_lines, jsonl_rows, kill, run_cli, start_cli, wait_until

KILL_SEED = int(os.environ.get("TOMRL_KILL_SEED") or random.SystemRandom().randrange(10**6))


def kill_rng(name: str) -> random.Random:
    return random.Random(f"{KILL_SEED}:{name}")


# --------------------------------------------------------------------------- atomic files under SIGKILL

FILE_WRITER = textwrap.dedent(
    """
    import sys
    from tomrl.io import atomic_write_text, write_jsonl
    from tomrl.schema import Example, write_examples
    path, kind = sys.argv[1], sys.argv[2]
    version = 0
    while True:
        version += 1
        if kind == "text":
            atomic_write_text(path, f"{version}\\n" + "x" * 2_000_000 + f"\\n{version}\\n")
        elif kind == "jsonl":
            write_jsonl(path, ({"version": version, "row": i, "pad": "y" * 200} for i in range(5000)))
        else:
            rows = [Example(id=f"e{i}", source="tomrl-tomi", split="train", story="A put the x in the box." * 20,
                            question="Where is the x?", answer="box", order=0, question_type="reality", deception=None,
                            story_length=1, story_id=f"s{i}", meta={"version": version}) for i in range(2000)]
            write_examples(path, rows)
        print(version, flush=True)
    """
)


def _check_file(path: Path, kind: str) -> int:
    """The version of a complete file; fails on a torn one."""
    if kind == "text":
        lines = path.read_text().split("\n")
        assert len(lines) == 4 and lines[0] == lines[2] and len(lines[1]) == 2_000_000, "torn file"
        return int(lines[0])
    if kind == "jsonl":
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        assert len(rows) == 5000 and len({r["version"] for r in rows}) == 1, "torn JSONL file"
        return rows[0]["version"]
    from tomrl.schema import read_examples

    examples = read_examples(path)
    assert len(examples) == 2000 and len({e.meta["version"] for e in examples}) == 1, "torn examples file"
    return examples[0].meta["version"]


@pytest.mark.parametrize("kind", ["text", "jsonl", "examples"])
def test_atomic_file_writes_survive_sigkill(tmp_path, kind):
    rng = kill_rng(f"atomic-{kind}")
    for attempt in range(4):
        target = tmp_path / f"{kind}-{attempt}.out"
        child = subprocess.Popen([sys.executable, "-c", FILE_WRITER, str(target), kind], stdout=subprocess.PIPE, text=True,
                                 env={**os.environ, "OMP_NUM_THREADS": "1"})
        first = child.stdout.readline()  # one complete write, so the target exists
        assert first.strip() == "1", f"writer did not start (seed {KILL_SEED})"
        time.sleep(rng.uniform(0.0, 0.6))
        kill(child)
        version = _check_file(target, kind)
        assert version >= 1, f"seed {KILL_SEED}"
        leftovers = list(tmp_path.glob(f".{target.name}.*.tmp"))
        assert len(leftovers) <= 1  # at most the write the kill interrupted; never read as the file
        for leftover in leftovers:
            leftover.unlink()


# --------------------------------------------------------------------------- checkpoint folders

FOLDER_WRITER = textwrap.dedent(
    """
    import json, sys
    import torch
    from safetensors.torch import save_file
    from tomrl.io import write_folder_atomically
    target = sys.argv[1]
    version = 0
    def write(folder):
        save_file({"w": torch.full((500_000,), float(version))}, str(folder / "model.safetensors"))
        (folder / "state.json").write_text(json.dumps({"version": version}))
    while True:
        version += 1
        write_folder_atomically(target, write)
        print(version, flush=True)
    """
)


def _check_folder(folder: Path) -> int:
    from safetensors.torch import load_file

    version = json.loads((folder / "state.json").read_text())["version"]
    weights = load_file(str(folder / "model.safetensors"))["w"]
    assert weights.numel() == 500_000 and bool((weights == version).all()), f"{folder}: weights of another version"
    return version


def test_checkpoint_folders_survive_sigkill(tmp_path):
    """``best/`` and ``final/`` are rewritten in place; a SIGKILL at a random moment never corrupts them."""
    from tomrl.training.checkpoints import remove_partial

    rng = kill_rng("folders")
    for attempt in range(3):
        target = tmp_path / f"run{attempt}" / "best"
        target.parent.mkdir()
        child = subprocess.Popen([sys.executable, "-c", FOLDER_WRITER, str(target)], stdout=subprocess.PIPE, text=True,
                                 env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert child.stdout.readline().strip() == "1", f"writer did not start (seed {KILL_SEED})"
        time.sleep(rng.uniform(0.0, 0.8))
        kill(child)
        remove_partial(target.parent)  # what --resume does to a run folder
        if target.exists():
            _check_folder(target)


PUBLISH_CRASH = textwrap.dedent(
    """
    import os, shutil, sys
    from pathlib import Path
    from tomrl.io import write_folder_atomically
    target, crash_after = Path(sys.argv[1]), int(sys.argv[2])
    write_folder_atomically(target, lambda f: (f / "state.json").write_text('{"version": 1}'))
    calls = 0
    def crashing(real):
        def call(*args, **kwargs):
            global calls
            result = real(*args, **kwargs)
            calls += 1
            if calls == crash_after:
                os._exit(9)  # like SIGKILL: no cleanup, no finally
            return result
        return call
    os.replace = crashing(os.replace)
    shutil.rmtree = crashing(shutil.rmtree)
    write_folder_atomically(target, lambda f: (f / "state.json").write_text('{"version": 2}'))
    """
)


# The replacement of an existing folder makes five file-system calls (rmtree staging, rmtree an old
# retired copy, rename target -> retired, rename staging -> target, rmtree retired); a crash after each.
@pytest.mark.parametrize(
    "crash_after",
    [
        1,
        2,
        3,
        4,
        5,
    ],
)
def test_folder_swap_cut_at_each_rename_keeps_one_complete_version(tmp_path, crash_after):
    """The replacement of an existing folder, killed after each of its renames/deletes, then recovered."""
    from tomrl.training.checkpoints import remove_partial

    target = tmp_path / "run" / "best"
    crashed = subprocess.run([sys.executable, "-c", PUBLISH_CRASH, str(target), str(crash_after)], check=False, timeout=120)
    assert crashed.returncode == 9, "the crash point was not reached"
    remove_partial(target.parent)
    assert target.is_dir(), f"after a crash at step {crash_after} neither version of {target.name}/ is left: {sorted(p.name for p in target.parent.iterdir())}"
    assert json.loads((target / "state.json").read_text())["version"] in (1, 2)


# --------------------------------------------------------------------------- recipe folders

TINY_RECIPE = """\
name: tiny
paper: tomrl
description: a generated ToMi set divided by story
seed: 0
components:
  - name: gen
    generate: {benchmark: tomi, n: 24, stories: 12}
    split_counts: {train: 8, validation: 4, test: 4}
"""

# A child-process preamble: exit like SIGKILL right after the sys.argv[2]-th file tomrl.io writes.
CRASH_AFTER_FILES = textwrap.dedent(
    """
    import contextlib, os, sys
    import tomrl.io as io
    real, written = io.atomic_open, 0
    @contextlib.contextmanager
    def crash_after_some_files(*args, **kwargs):
        global written
        with real(*args, **kwargs) as handle:
            yield handle
        written += 1
        if written == int(sys.argv[2]):
            os._exit(9)  # like SIGKILL between two files
    io.atomic_open = crash_after_some_files
    """
)

RECIPE_CRASH = CRASH_AFTER_FILES + textwrap.dedent(
    """
    from tomrl.cli import main
    sys.exit(main(["data", "load", "recipe:" + sys.argv[3], "--out", sys.argv[1]]))
    """
)


@pytest.mark.parametrize("files_written", [1, 2, 3, 4])
def test_recipe_folder_is_all_or_nothing(tmp_path, files_written):
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(TINY_RECIPE)
    out = tmp_path / "data"
    crashed = subprocess.run([sys.executable, "-c", RECIPE_CRASH, str(out), str(files_written), str(recipe)], timeout=300)
    assert crashed.returncode == 9, "the crash point was not reached"
    if out.exists():
        manifest = out / "manifest.json"
        assert manifest.exists(), f"half-written recipe folder: {sorted(p.name for p in out.rglob('*') if p.is_file())}"
        listed = {info["file"] for info in json.loads(manifest.read_text())["files"].values()} | {"recipe.yaml", "manifest.json"}
        assert listed == {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}


RECIPE_RENAME_CRASH = textwrap.dedent(
    """
    import os, sys
    real, renamed = os.replace, 0
    def crash_after_some_renames(*args, **kwargs):
        global renamed
        real(*args, **kwargs)
        renamed += 1
        if renamed == int(sys.argv[2]):
            os._exit(9)  # like SIGKILL right after this rename
    os.replace = crash_after_some_renames
    from tomrl.cli import main
    sys.exit(main(["data", "load", "recipe:" + sys.argv[3], "--out", sys.argv[1]]))
    """
)

OLD_RECIPE = TINY_RECIPE.replace("name: tiny", "name: old") + """\
  - name: stale
    generate: {benchmark: tomi, n: 4, seed: 3}
    split: test
"""


def _recipe_files(out: Path) -> set[str]:
    return {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}


def _assert_complete_recipe_folder(out: Path) -> str:
    """The folder holds exactly the files its manifest lists; returns the recipe's name."""
    manifest = json.loads((out / "manifest.json").read_text())
    listed = {info["file"] for info in manifest["files"].values()} | {"recipe.yaml", "manifest.json"}
    assert listed == _recipe_files(out), f"{sorted(_recipe_files(out))} vs manifest {sorted(listed)}"
    return manifest["recipe"]


# 5 files are written (train, validation, test/gen, recipe.yaml, manifest.json: one rename each), then the
# old folder is moved aside (rename 6) and the new one moved in (rename 7).
@pytest.mark.parametrize("renames", [2, 5, 6, 7])
def test_recipe_rerun_over_an_old_folder_cut_at_each_rename(tmp_path, renames):
    """Re-running a recipe into an older recipe folder, cut after a rename: the folder is the old or the
    new version, complete, and once a run finishes no stale test file of the old version is left."""
    from tomrl.config import ConfigError
    from tomrl.loaders.recipes import write_recipe

    (tmp_path / "old.yaml").write_text(OLD_RECIPE)
    (tmp_path / "tiny.yaml").write_text(TINY_RECIPE)
    out = tmp_path / "data"
    write_recipe(tmp_path / "old.yaml", out)
    assert "test/stale.jsonl" in _recipe_files(out)
    crashed = subprocess.run([sys.executable, "-c", RECIPE_RENAME_CRASH, str(out), str(renames), str(tmp_path / "tiny.yaml")], timeout=300)
    assert crashed.returncode == 9, "the crash point was not reached"
    # The next run cleans up what the crash left, even when its own build then fails.
    (tmp_path / "broken.yaml").write_text(TINY_RECIPE.replace("train: 8", "train: 800"))
    with pytest.raises(ConfigError, match="needs 800 rows"):
        write_recipe(tmp_path / "broken.yaml", out)
    assert _assert_complete_recipe_folder(out) == ("tiny" if renames == 7 else "old")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.yaml", "data", "old.yaml", "tiny.yaml"]
    write_recipe(tmp_path / "tiny.yaml", out)
    assert _assert_complete_recipe_folder(out) == "tiny" and "test/stale.jsonl" not in _recipe_files(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.yaml", "data", "old.yaml", "tiny.yaml"]


# --------------------------------------------------------------------------- the training data a run freezes

DATA_CRASH = CRASH_AFTER_FILES + textwrap.dedent(
    """
    from tomrl.config import load_config
    from tomrl.training.config import TrainConfig
    from tomrl.training.data import prepare_data
    cfg = load_config(TrainConfig, sys.argv[3], ["run_dir=" + sys.argv[1]])
    prepare_data(cfg, sys.argv[1])
    """
)


@pytest.mark.parametrize(
    "files_written",
    [
        1,
        2,
    ],
)
def test_frozen_training_data_survives_a_crash_between_its_files(tmp_path, files_written):
    """A run freezes its data (stage files, train.jsonl, validation.jsonl); a crash between them, then a resume."""
    from tomrl.config import load_config
    from tomrl.training.config import TrainConfig
    from tomrl.training.data import prepare_data

    smoke = str(REPO_ROOT / "configs/train/smoke_cpu.yaml")
    clean = prepare_data(load_config(TrainConfig, smoke, [f"run_dir={tmp_path / 'clean'}"]), tmp_path / "clean")
    crashed = subprocess.run([sys.executable, "-c", DATA_CRASH, str(tmp_path / "run"), str(files_written), smoke], timeout=300)
    assert crashed.returncode == 9, "the crash point was not reached"
    resumed = prepare_data(load_config(TrainConfig, smoke, [f"run_dir={tmp_path / 'run'}"]), tmp_path / "run")
    assert [e.id for e in resumed[0]] == [e.id for e in clean[0]]
    assert [e.id for e in resumed[1]] == [e.id for e in clean[1]] and clean[1], "the validation set was lost"


def test_resume_drops_every_log_row_after_the_checkpoint(tmp_path):
    """What --resume does to the per-step logs of a run killed at step 4 with its last checkpoint at step 2."""
    from tomrl.training.checkpoints import truncate_step_logs

    logs = ("metrics.jsonl", "samples.jsonl", "validation.jsonl", "validation_samples.jsonl")
    for name in logs:
        (tmp_path / name).write_text("".join(json.dumps({"step": step, "log": name}) + "\n" for step in (0, 1, 2, 3, 4)))
    truncate_step_logs(tmp_path, 2)
    for name in logs:
        assert [r["step"] for r in jsonl_rows(tmp_path / name)] == [0, 1, 2], name


# --------------------------------------------------------------------------- tomrl eval


EVAL_ITEMS = 16  # two benchmarks x 8 questions


def eval_args(out: Path) -> list[str]:
    return ["eval", "--model", "tiny-qwen2", "--benchmark", "tomrl-hitom-order0,tomrl-hitom-order1", "--limit", "8",
            "--greedy", "--out", str(out), "heldout_n=8", "max_new_tokens=32", "batch_size=2", "hf_mode=slots"]


def interruptible_eval_args(out: Path) -> list[str]:
    """``eval_args`` with answers long enough, and decoded one at a time, so that a Ctrl-C sent after
    the second answer lands mid-run: in one batch the tiny model's 16 answers all run to the token
    budget together and finish within moments of each other, before the signal arrives."""
    return [*eval_args(out), "max_new_tokens=256", "batch_size=1"]


def _counts(stdout: str) -> tuple[int, int]:
    match = re.search(r"\((\d+) answers generated now, (\d+) reused\)", stdout)
    assert match, stdout[-2000:]
    return int(match.group(1)), int(match.group(2))


def _check_eval_complete(out: Path) -> list[dict]:
    rows = jsonl_rows(out / "samples.jsonl")
    keys = [(r["benchmark"], r["id"]) for r in rows]
    assert len(keys) == len(set(keys)) == EVAL_ITEMS, f"{len(keys)} rows, {len(set(keys))} distinct (seed {KILL_SEED})"
    results = json.loads((out / "results.json").read_text())
    for name, entry in results["benchmarks"].items():
        assert entry["complete"] and entry["n_answered"] == entry["n_selected"] == EVAL_ITEMS // 2, (name, entry)
    return rows


def test_eval_killed_at_a_random_point_resumes_without_redoing_or_losing_answers(tmp_path, hermetic_home):
    env = cli_env(hermetic_home)
    out = tmp_path / "run"
    kill_at = kill_rng("eval").randint(1, EVAL_ITEMS - 6)
    process = start_cli(eval_args(out), env, tmp_path, tmp_path / "killed.log")
    reached = wait_until(lambda: len(complete_lines(out / "samples.jsonl")) >= kill_at, process, timeout=240)
    kill(process)
    before = complete_lines(out / "samples.jsonl")
    assert reached and 0 < len(before) < EVAL_ITEMS, f"kill after {kill_at} answers missed: {len(before)} (seed {KILL_SEED})"
    with open(out / "samples.jsonl", "ab") as handle:  # what a kill in the middle of a write leaves
        handle.write(b'{"benchmark": "tomrl-hitom-order0", "id": "tomrl-hitom-')

    result = run_cli(eval_args(out), env, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    generated, reused = _counts(result.stdout)
    assert (generated, reused) == (EVAL_ITEMS - len(before), len(before)), f"seed {KILL_SEED}"
    after = complete_lines(out / "samples.jsonl")
    assert after[: len(before)] == before, "answers written before the kill were changed"
    _check_eval_complete(out)

    again = run_cli(eval_args(out), env, tmp_path)  # a finished run redoes nothing
    assert again.returncode == 0 and _counts(again.stdout) == (0, EVAL_ITEMS)
    assert complete_lines(out / "samples.jsonl") == after


@pytest.fixture(scope="module")
def interrupted_eval(tmp_path_factory, hermetic_home) -> dict:
    """``tomrl eval`` stopped with Ctrl-C (SIGINT) after two answers: exit code, output, folder, answers kept."""
    folder = tmp_path_factory.mktemp("interrupted")
    out = folder / "run"
    log = folder / "interrupted.log"
    process = start_cli(interruptible_eval_args(out), cli_env(hermetic_home), folder, log)
    reached = wait_until(lambda: len(complete_lines(out / "samples.jsonl")) >= 2, process, timeout=240)
    code = kill(process, signal.SIGINT)
    assert reached, log.read_text()[-2000:]
    return {"code": code, "log": log.read_text(), "out": out, "folder": folder, "lines": complete_lines(out / "samples.jsonl")}


def test_eval_ctrl_c_stops_cleanly_and_the_rerun_finishes(interrupted_eval, hermetic_home):
    code, log, out = interrupted_eval["code"], interrupted_eval["log"], interrupted_eval["out"]
    assert code == 128 + signal.SIGINT, log[-2000:]
    assert "Traceback" not in log and "interrupted" in log, log[-2000:]
    assert (out / "samples.jsonl").read_bytes().endswith(b"\n")  # no torn line after a clean stop
    json.loads((out / "results.json").read_text())  # the summary of what was done is valid
    done = len(interrupted_eval["lines"])
    result = run_cli(interruptible_eval_args(out), cli_env(hermetic_home), interrupted_eval["folder"])
    assert result.returncode == 0 and _counts(result.stdout) == (EVAL_ITEMS - done, done)
    _check_eval_complete(out)


def test_eval_ctrl_c_says_how_to_resume(interrupted_eval):
    log = interrupted_eval["log"]
    assert interrupted_eval["code"] == 128 + signal.SIGINT and "interrupted" in log
    assert re.search(r"same command|resume", log.split("interrupted", 1)[1]), log[-1500:]


# --------------------------------------------------------------------------- tomrl train (slow)


TRAIN_STEPS = 4


def train_args(run_dir: Path) -> list[str]:
    return ["train", "--config", str(REPO_ROOT / "configs/train/smoke_cpu.yaml"), f"run_dir={run_dir}", f"max_steps={TRAIN_STEPS}",
            "save_every=1", "eval.at_start=false", "eval.every_steps=0", "progress=false", "report_to=[]"]


class CheckpointWatcher:
    """Checks every checkpoint-N folder as soon as it appears under its final name (it must be complete)."""

    def __init__(self, run_dir: Path):
        self.folder = run_dir / "checkpoints"
        self.checked: set[str] = set()
        self.problems: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _watch(self):
        while not self._stop.is_set():
            for path in sorted(self.folder.glob("checkpoint-*")) if self.folder.is_dir() else []:
                if path.name not in self.checked and re.fullmatch(r"checkpoint-\d+", path.name):
                    problem = checkpoint_problem(path)
                    if problem and path.exists():  # a folder deleted while read (older checkpoints go) is not corrupt
                        self.problems.append(problem)
                    self.checked.add(path.name)
            time.sleep(0.05)


def checkpoint_problem(path: Path) -> str | None:
    """Why ``path`` is not a complete checkpoint (weights, optimizer, scheduler, RNG, trainer state), or None."""
    from safetensors import safe_open

    try:
        step = int(path.name.split("-")[1])
        state = json.loads((path / "trainer_state.json").read_text())
        if state["global_step"] != step:
            return f"{path}: trainer_state.json says step {state['global_step']}"
        with safe_open(str(path / "model.safetensors"), framework="pt") as weights:
            for key in weights.keys():
                weights.get_tensor(key)
        for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth"):
            if (path / name).stat().st_size == 0:
                return f"{path}: {name} is empty"
    except Exception as error:  # noqa: BLE001 - any failure to read it is the finding
        return f"{path}: {type(error).__name__}: {error}"
    return None


def _step_order(run_dir: Path) -> list[tuple[int, str]]:
    return [(r["step"], r["id"]) for r in jsonl_rows(run_dir / "samples.jsonl")]


def _rollouts(run_dir: Path) -> list[tuple[int, str, str]]:
    return [(r["step"], r["id"], r["completion"]) for r in jsonl_rows(run_dir / "samples.jsonl")]


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory, hermetic_home) -> Path:
    """An uninterrupted training run, the yardstick of the resumed ones."""
    folder = tmp_path_factory.mktemp("reference")
    result = run_cli(train_args(folder / "run"), cli_env(hermetic_home), folder, timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return folder / "run"


def _assert_same_as_reference(run_dir: Path, reference: Path) -> None:
    assert [r["step"] for r in jsonl_rows(run_dir / "metrics.jsonl")] == list(range(1, TRAIN_STEPS + 1)), f"seed {KILL_SEED}"
    assert json.loads((run_dir / "summary.json").read_text())["steps"] == TRAIN_STEPS
    assert _step_order(run_dir) == _step_order(reference), f"data order differs from the uninterrupted run (seed {KILL_SEED})"
    assert _rollouts(run_dir) == _rollouts(reference), f"rollouts differ from the uninterrupted run (seed {KILL_SEED})"
    for path in (run_dir / "checkpoints").glob("checkpoint-*"):
        assert checkpoint_problem(path) is None


def _step_seconds(reference: Path) -> float:
    """The uninterrupted run's shortest step (TRL's ``step_time``): steps got faster as training did, so
    kill delays are drawn within one step of this machine, never from a fixed guess."""
    return min(r["step_time"] for r in jsonl_rows(reference / "metrics.jsonl") if "step_time" in r)


def _kill_training_at_random(
    run_dir: Path, args: list[str], env: dict, cwd: Path, rng: random.Random, log: Path, fewest_steps: int, step_seconds: float
) -> str:
    """Start training, SIGKILL it once ``metrics.jsonl`` has a random number of steps (from ``fewest_steps`` to
    TRAIN_STEPS - 2) plus a random delay shorter than one step, so the run is never over by then."""
    after_steps = rng.randint(fewest_steps, TRAIN_STEPS - 2)
    delay = rng.uniform(0.0, step_seconds)
    process = start_cli(args, env, cwd, log)
    wait_until(lambda: len(complete_lines(run_dir / "metrics.jsonl")) >= after_steps and (run_dir / "data" / "train.jsonl").exists(),
               process, timeout=600)
    time.sleep(delay)
    code = kill(process)
    where = f"after {after_steps} steps + {delay:.1f} s"
    assert code == -signal.SIGKILL, f"the run ended before the kill {where} (seed {KILL_SEED}): exit {code}\n" + log.read_text()[-2000:]
    checkpoints = sorted(p.name for p in (run_dir / "checkpoints").glob("checkpoint-*"))
    return f"{where} (checkpoints then: {', '.join(checkpoints) or 'none'})"


@pytest.mark.slow
@pytest.mark.parametrize("attempt", range(3))
def test_train_killed_at_random_points_resumes_like_an_uninterrupted_run(tmp_path, hermetic_home, reference_run, attempt):
    env = cli_env(hermetic_home)
    run_dir = tmp_path / "run"
    rng = kill_rng(f"train-{attempt}")
    resume = ["train", "--resume", str(run_dir)]
    with CheckpointWatcher(run_dir) as watcher:
        step_seconds = _step_seconds(reference_run)
        where = [_kill_training_at_random(run_dir, train_args(run_dir), env, tmp_path, rng, tmp_path / "first.log", 0, step_seconds)]
        logged = len(complete_lines(run_dir / "metrics.jsonl"))
        if logged <= TRAIN_STEPS - 2:  # kill the resumed run too, somewhere after where the first one stopped
            where.append(_kill_training_at_random(run_dir, resume, env, tmp_path, rng, tmp_path / "second.log", logged, step_seconds))
        result = run_cli(resume, env, tmp_path, timeout=900)
    assert result.returncode == 0, f"killed {where} (seed {KILL_SEED}): " + result.stdout[-2000:] + result.stderr[-3000:]
    assert not watcher.problems, watcher.problems
    assert watcher.checked, "no checkpoint was ever seen"
    print(f"seed {KILL_SEED}: killed {' then '.join(where)}; checkpoints checked as they appeared: {sorted(watcher.checked)}")
    _assert_same_as_reference(run_dir, reference_run)


@pytest.mark.slow
def test_train_ctrl_c_says_how_to_resume_and_resumes(tmp_path, hermetic_home, reference_run):
    env = cli_env(hermetic_home)
    run_dir = tmp_path / "run"
    process = start_cli(train_args(run_dir), env, tmp_path, tmp_path / "train.log")
    assert wait_until(lambda: len(complete_lines(run_dir / "metrics.jsonl")) >= 1, process, timeout=600)
    code = kill(process, signal.SIGINT, timeout=300)
    log = (tmp_path / "train.log").read_text()
    assert code == 128 + signal.SIGINT, log[-3000:]
    assert f"tomrl train --resume {run_dir}" in " ".join(log.split()), log[-3000:]
    for path in (run_dir / "checkpoints").glob("checkpoint-*"):
        assert checkpoint_problem(path) is None
    result = run_cli(["train", "--resume", str(run_dir)], env, tmp_path, timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    _assert_same_as_reference(run_dir, reference_run)
