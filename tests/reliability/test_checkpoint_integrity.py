"""A damaged last checkpoint: found before the model loads, one error, and ``--fallback`` to resume anyway.

Every checkpoint is written atomically (tests/reliability/test_crash_resume.py), so damage comes from
outside: a copy cut short, a bad disk, a file replaced by hand. ``tomrl train --resume`` used to hand
such a checkpoint to transformers and end in a traceback (safetensors' "incomplete metadata",
torch's "failed finding central directory", "Unsupported operand", a JSONDecodeError, torch's
weights-only "Unsupported global"), and a few damaged bytes inside ``optimizer.pt`` were not noticed
at all: torch does not check the archive's checksums, so the run silently resumed with a corrupt
optimizer state. Now :func:`tomrl.training.checkpoints.checkpoint_problem` checks the checkpoint
first, the error names the file and the fix, and ``--fallback`` sets the damaged checkpoint aside
(``checkpoint-N.damaged``, kept) and resumes from the previous one, or from step 0.

Also here: a run killed between its checkpoint at ``max_steps`` and ``final/`` trained one step past
``max_steps`` when resumed; it now writes ``final/`` from that checkpoint without training.

    .venv/bin/python -m pytest tests/reliability/test_checkpoint_integrity.py
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from reliability_helpers import REPO_ROOT, cli_env, jsonl_rows, one_error, run_cli

from tomrl.cli import main
from tomrl.io import BadInputError
from tomrl.training import checkpoints

SMOKE = str(REPO_ROOT / "configs" / "train" / "smoke_cpu.yaml")
TINY_RUN = ["eval.at_start=false", "eval.every_steps=0", "progress=false", "max_completion_length=8", "report_to=[]", "save_every=1"]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, hermetic_home) -> Path:
    """A finished 1-step run of the tiny model: checkpoints/checkpoint-1, final/ and summary.json."""
    run_dir = tmp_path_factory.mktemp("integrity") / "run"
    result = run_cli(["train", "--config", SMOKE, f"run_dir={run_dir}", "max_steps=1", *TINY_RUN], cli_env(hermetic_home), run_dir.parent)
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir


def _killed_before_final(finished_run: Path, target: Path) -> Path:
    """A copy of the run as a kill between its last checkpoint and final/ leaves it."""
    shutil.copytree(finished_run, target)
    shutil.rmtree(target / "final")
    (target / "summary.json").unlink()
    return target


# --------------------------------------------------------------------------- what the check finds


def _truncate(path: Path, size: int) -> None:
    with open(path, "r+b") as handle:
        handle.truncate(size)


def _overwrite(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as handle:
        handle.seek(offset)
        handle.write(data)


def _refused_pickle(path: Path) -> None:
    import fractions

    import torch

    torch.save({"state": {}, "param_groups": [], "extra": fractions.Fraction(1, 3)}, path)  # not on torch's safe list


def _as_lora(folder: Path) -> None:
    (folder / "model.safetensors").rename(folder / "adapter_model.safetensors")
    _truncate(folder / "adapter_model.safetensors", 5000)


def _other_step(path: Path) -> None:
    state = json.loads(path.read_text())
    path.write_text(json.dumps({**state, "global_step": 7}))


DAMAGE = {
    "model.safetensors cut short": (lambda c: _truncate(c / "model.safetensors", 100_000), "model.safetensors: cut short"),
    "adapter_model.safetensors (LoRA) cut short": (_as_lora, "adapter_model.safetensors: cut short"),
    "optimizer.pt cut short": (lambda c: _truncate(c / "optimizer.pt", 1_000_000), "optimizer.pt: not a complete torch file"),
    "optimizer.pt with bytes overwritten": (lambda c: _overwrite(c / "optimizer.pt", 5_000_000, b"\xff" * 1000), "optimizer.pt: damaged: optimizer/data/"),
    "optimizer.pt refused by weights_only": (lambda c: _refused_pickle(c / "optimizer.pt"), "optimizer.pt: holds a pickled fractions.Fraction"),
    "optimizer.pt missing": (lambda c: (c / "optimizer.pt").unlink(), "optimizer.pt: missing"),
    "scheduler.pt garbage": (lambda c: (c / "scheduler.pt").write_text("garbage\n"), "scheduler.pt: not a complete torch file"),
    "rng_state.pth cut short": (lambda c: _truncate(c / "rng_state.pth", 500), "rng_state.pth: not a complete torch file"),
    "trainer_state.json cut short": (lambda c: _truncate(c / "trainer_state.json", 50), "trainer_state.json: not valid JSON"),
    "trainer_state.json of another step": (lambda c: _other_step(c / "trainer_state.json"), "trainer_state.json: says global_step 7"),
}


def test_an_intact_checkpoint_passes(finished_run):
    assert checkpoints.checkpoint_problem(checkpoints.latest_checkpoint(finished_run)) is None


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_checkpoint_problem_names_the_damaged_file(tmp_path, finished_run, damage):
    checkpoint = tmp_path / "checkpoint-1"
    shutil.copytree(finished_run / "checkpoints" / "checkpoint-1", checkpoint)
    apply, expected = DAMAGE[damage]
    apply(checkpoint)
    problem = checkpoints.checkpoint_problem(checkpoint)
    assert problem is not None and problem.startswith(expected), problem


def test_a_damaged_only_checkpoint_says_there_is_no_earlier_one_and_fallback_sets_it_aside(tmp_path, finished_run):
    from tomrl.training.run import _check_last_checkpoint

    run_dir = _killed_before_final(finished_run, tmp_path / "run")
    _truncate(run_dir / "checkpoints" / "checkpoint-1" / "model.safetensors", 100)
    with pytest.raises(BadInputError) as raised:
        _check_last_checkpoint(run_dir, fallback=False)
    assert "no earlier one is kept" in str(raised.value) and f"tomrl train --resume {run_dir} --fallback" in str(raised.value)
    assert (run_dir / "checkpoints" / "checkpoint-1").is_dir()  # the error changes nothing

    note = _check_last_checkpoint(run_dir, fallback=True)
    assert "training again from step 0" in note
    assert checkpoints.latest_checkpoint(run_dir) is None
    assert [p.name for p in checkpoints.damaged_checkpoints(run_dir)] == ["checkpoint-1.damaged"]
    from tomrl.training.run import _run_saved_progress

    assert _run_saved_progress(run_dir)  # a new run may not take over (and delete) the folder holding it


def test_fallback_goes_with_resume(capsys):
    assert main(["train", "--fallback", "--config", SMOKE]) == 2
    assert "--fallback goes with --resume" in one_error(capsys.readouterr().err, alone=False)


# --------------------------------------------------------------------------- tomrl train --resume


def test_resume_from_a_damaged_checkpoint_is_one_error_then_fallback_trains_again(tmp_path, hermetic_home, finished_run):
    env = cli_env(hermetic_home)
    run_dir = _killed_before_final(finished_run, tmp_path / "run")
    optimizer = run_dir / "checkpoints" / "checkpoint-1" / "optimizer.pt"
    _truncate(optimizer, 1_000_000)
    metrics = (run_dir / "metrics.jsonl").read_text()

    failed = run_cli(["train", "--resume", str(run_dir)], env, tmp_path)
    assert failed.returncode == 2, failed.stderr[-3000:]
    line = one_error(failed.stderr, alone=False)
    assert f"{optimizer}: not a complete torch file" in line and f"tomrl train --resume {run_dir} --fallback" in line, line
    assert optimizer.stat().st_size == 1_000_000 and (run_dir / "metrics.jsonl").read_text() == metrics

    resumed = run_cli(["train", "--resume", str(run_dir), "--fallback"], env, tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    said = " ".join(resumed.stdout.split())
    assert "checkpoint-1 is damaged" in said and "set aside as" in said and "training again from step 0" in said, said
    assert sorted(p.name for p in (run_dir / "checkpoints").glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-1.damaged"]
    assert (run_dir / "checkpoints" / "checkpoint-1.damaged" / "optimizer.pt").stat().st_size == 1_000_000  # kept as it was
    assert [row["step"] for row in jsonl_rows(run_dir / "metrics.jsonl")] == [1]
    assert json.loads((run_dir / "summary.json").read_text())["steps"] == 1
    # Trained again from the same seed and data: the model the first run finished with.
    assert (run_dir / "final" / "model.safetensors").read_bytes() == (finished_run / "final" / "model.safetensors").read_bytes()


def test_a_run_killed_before_final_resumes_without_training_past_max_steps(tmp_path, hermetic_home, finished_run):
    run_dir = _killed_before_final(finished_run, tmp_path / "run")
    resumed = run_cli(["train", "--resume", str(run_dir)], cli_env(hermetic_home), tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "writing final/ from it without training" in " ".join(resumed.stdout.split())
    assert [row["step"] for row in jsonl_rows(run_dir / "metrics.jsonl")] == [1]  # was [1, 2]: a step past max_steps=1
    assert json.loads((run_dir / "summary.json").read_text())["steps"] == 1
    assert [p.name for p in (run_dir / "checkpoints").glob("checkpoint-*")] == ["checkpoint-1"]
    assert (run_dir / "final" / "model.safetensors").read_bytes() == (finished_run / "final" / "model.safetensors").read_bytes()


@pytest.mark.slow
def test_fallback_resumes_from_the_previous_checkpoint(tmp_path, hermetic_home, finished_run):
    """Two checkpoints kept (keep_checkpoints=2): the damaged latest is set aside and the run continues
    from the one before, to the weights it had reached."""
    env = cli_env(hermetic_home)
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    longer = run_cli(["train", "--resume", str(run_dir), "max_steps=2", "keep_checkpoints=2"], env, tmp_path)
    assert longer.returncode == 0, longer.stderr[-3000:]
    assert sorted(p.name for p in (run_dir / "checkpoints").glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    reached = (run_dir / "final" / "model.safetensors").read_bytes()
    shutil.rmtree(run_dir / "final")
    (run_dir / "summary.json").unlink()
    _truncate(run_dir / "checkpoints" / "checkpoint-2" / "model.safetensors", 100_000)

    failed = run_cli(["train", "--resume", str(run_dir)], env, tmp_path)
    assert failed.returncode == 2, failed.stderr[-3000:]
    line = one_error(failed.stderr, alone=False)
    assert "checkpoint-2/model.safetensors: cut short" in line and "resume from checkpoint-1" in line, line

    resumed = run_cli(["train", "--resume", str(run_dir), "--fallback"], env, tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming from checkpoint-1" in " ".join(resumed.stdout.split())
    assert sorted(p.name for p in (run_dir / "checkpoints").glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2", "checkpoint-2.damaged"]
    assert [row["step"] for row in jsonl_rows(run_dir / "metrics.jsonl")] == [1, 2]
    assert (run_dir / "final" / "model.safetensors").read_bytes() == reached
