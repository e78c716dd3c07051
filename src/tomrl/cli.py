"""The ``tomrl`` command line: one verb per pipeline stage.

    tomrl data generate hitom --n 1000 --seed 0 --out data/hitom.jsonl
    tomrl data load hitom --out data/hitom_official.jsonl
    tomrl data audit --train train.jsonl --test test.jsonl
    tomrl data verify hitom
    tomrl data check data/train.jsonl --skip-bad --out data/clean.jsonl
    tomrl reward score --reward strict --input completions.jsonl --out scored.jsonl
    tomrl eval --model smollm2-135m --benchmark hitom600 --limit 20
    tomrl train --config configs/train/smoke_cpu.yaml max_steps=2
    tomrl plan --config configs/train/paper_a_qwen2.5-7b.yaml --accelerate configs/accelerate/deepspeed_zero3_offload.yaml --gpus 4
    tomrl export verl --config configs/train/paper_a_qwen2.5-0.5b.yaml --out verl_data
    tomrl report runs/demo
    tomrl models list | prepare smollm2-135m
    tomrl demo

Each verb lives in the module of its stage, which provides ``register(parser)`` (arguments) and
``run(args) -> int`` (the work). Modules import their heavy libraries inside ``run`` so that
``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import io
import os
import re
import signal
import sys
import traceback
from pathlib import Path

# verb -> module, or verb -> {sub-verb -> module}. The order is the pipeline's order.
COMMANDS: dict[str, str | dict[str, str]] = {
    "data": {
        "generate": "tomrl.generators.command",
        "verify": "tomrl.generators.verify",
        "load": "tomrl.loaders.command",
        "audit": "tomrl.audit.command",
        "neutrality": "tomrl.generators.neutrality",
        "check": "tomrl.data_checks",
    },
    "reward": {"score": "tomrl.rewards.command"},
    "train": "tomrl.training.command",
    "plan": "tomrl.training.plan_command",
    "export": {"verl": "tomrl.training.verl_export"},
    "eval": "tomrl.evaluation.command",
    "report": "tomrl.analysis.command",
    "analyze": {"interventions": "tomrl.analysis.interventions", "probes": "tomrl.analysis.probes"},
    "study": "tomrl.study.command",
    "models": {"list": "tomrl.models_command:list_command", "prepare": "tomrl.models_command:prepare_command"},
    "demo": "tomrl.demo",
}

DESCRIPTIONS = {
    "data": "generate, load, verify and audit Theory-of-Mind data",
    "reward": "score completions with a reward function",
    "train": "RL training (GRPO, REINFORCE++) on TRL",
    "plan": "will a training config fit its GPUs? memory per GPU and time per step (estimates), before a launch",
    "export": "export data and rewards for other RL engines (veRL)",
    "eval": "evaluate a model on ToM benchmarks",
    "report": "analyse runs: collapse, shortcuts, generalization, plots",
    "analyze": "does the reasoning carry the answer? trace interventions and belief probes on trained models",
    "study": "a grid of runs (mixtures x arms x seeds), trained, evaluated and compared",
    "models": "list and prepare models (the embedded SmolLM2-135M)",
    "demo": "the whole pipeline on the embedded model",
}


def _load(target: str):
    module_name, _, attribute = target.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attribute) if attribute else module


def _add_command(subparsers, name: str, target: str, help_text: str | None) -> None:
    command = _load(target)
    doc = (command.__doc__ or "").strip()
    parser = subparsers.add_parser(
        name,
        help=help_text or doc.splitlines()[0] if doc else help_text,
        description=doc or help_text,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.register(parser)
    parser.set_defaults(_run=command.run)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tomrl",
        description="Teach small language models Theory of Mind with RL from verifiable rewards, and measure it honestly.",
    )
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    for verb, target in COMMANDS.items():
        if isinstance(target, str):
            _add_command(verbs, verb, target, DESCRIPTIONS[verb])
            continue
        group = verbs.add_parser(verb, help=DESCRIPTIONS[verb], description=DESCRIPTIONS[verb])
        actions = group.add_subparsers(dest="action", metavar="ACTION")
        actions.required = True
        for action, sub_target in target.items():
            _add_command(actions, action, sub_target, None)
    return parser


def describe_os_error(err: OSError) -> str:
    """One line for an OSError: the path, what went wrong, and for common cases what it means."""
    hints = {
        errno.ENOTDIR: " (a file is where a folder is needed)",
        errno.EEXIST: " (a file is where a folder is needed)",
        errno.ENAMETOOLONG: " (file names are limited to 255 bytes)",
        errno.EACCES: "",
        errno.EROFS: "",
    }
    what = err.strerror or (str(err).splitlines()[0] if str(err) else type(err).__name__)
    where = f"{err.filename}: " if err.filename else ""
    return f"{where}{what}{hints.get(err.errno, '')}"


# Verbs whose rerun continues where the interrupted one stopped (tomrl train says how: args.continue_with).
RESUMING_VERBS = ("eval", "demo", "study")
# Local variables that name the file being written, in the frames of the writers tomrl calls: torch.save
# (f), safetensors' save_file (filename), json.dump (fp), tomrl's atomic_open and folders (path, target).
WRITTEN_PATH_LOCALS = ("filename", "f", "fp", "file", "path", "target", "save_directory")
ATOMIC_TEMP_NAME = re.compile(r"^\.(.+)\.\d+\.\w+\.tmp$")  # tomrl.io.atomic_open's .NAME.PID.XXXX.tmp


def describe_disk_full(err: BaseException, args: argparse.Namespace) -> str | None:
    """One line for a write that ran out of space (ENOSPC, EDQUOT), wherever it was raised: the file,
    the space left on its file system, and how to continue; None for any other error."""
    from tomrl.io import disk_full, free_bytes

    chain: list[BaseException] = []
    while err is not None and err not in chain:
        chain.append(err)
        err = err.__cause__ or err.__context__
    found = [(each, code) for each in chain if (code := disk_full(each)) is not None]
    if not found:
        return None
    code = found[-1][1]
    # The file named by an OSError (tomrl's trainer names the checkpoint), else by the write that failed.
    named = next((each for each, _ in found if isinstance(each, OSError) and each.filename), found[-1][0])
    path = _path_being_written(named)
    what = "no space left on device" if code == errno.ENOSPC else "disk quota exceeded"
    free = free_bytes(path or ".")
    where = f" while writing {path}" if path else ""
    room = f" ({free // 1_000_000} MB free on that filesystem)" if free is not None else ""
    if getattr(args, "continue_with", None):
        how = f"resume with: {args.continue_with}"
    elif getattr(args, "verb", None) in RESUMING_VERBS:
        how = "rerun the same command — it resumes"
    else:
        how = "rerun the same command"
    return f"{what}{where}{room}; free some space and {how}"


def _path_being_written(err: BaseException) -> str | None:
    """The file whose write raised ``err``: its filename, else the innermost frame of its traceback
    that holds one (Python's write() and safetensors' Rust errors carry no filename)."""
    if isinstance(err, OSError) and isinstance(err.filename, (str, bytes, os.PathLike)):
        return _shown_path(os.fsdecode(err.filename))
    for frame, _ in reversed(list(traceback.walk_tb(err.__traceback__))):
        local_vars = frame.f_locals
        for name in WRITTEN_PATH_LOCALS:
            value = local_vars.get(name)
            if isinstance(value, io.IOBase):
                value = getattr(value, "name", None)
            if isinstance(value, (str, os.PathLike)) and os.fspath(value):
                return _shown_path(os.fspath(value))
        owner_path = getattr(local_vars.get("self"), "path", None)  # tomrl.io.JsonlAppender.write
        if isinstance(owner_path, (str, os.PathLike)):
            return _shown_path(os.fspath(owner_path))
    return None


def _shown_path(path: str) -> str:
    """``path`` as the user knows it: a temporary file or a ``.partial`` folder by the name it was to get."""
    from tomrl.io import PARTIAL_SUFFIX, RETIRED_SUFFIX

    parts = [part.removesuffix(RETIRED_SUFFIX).removesuffix(PARTIAL_SUFFIX) for part in Path(path).parts]
    temp = ATOMIC_TEMP_NAME.match(parts[-1]) if parts else None
    if temp:
        parts[-1] = temp.group(1)
    return str(Path(*parts)) if parts else path


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # argparse ends a `nargs="*"` positional at the first flag, so key=value overrides written
    # after a flag (tomrl eval --model M max_new_tokens=32 --limit 4 seed=1) come back unparsed.
    overrides = [item for item in extra if "=" in item and not item.startswith("-")]
    if overrides and isinstance(getattr(args, "overrides", None), list):
        args.overrides.extend(overrides)
        extra = [item for item in extra if item not in overrides]
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    from tomrl.config import ConfigError
    from tomrl.io import BadInputError, redact_secrets

    try:
        return int(args._run(args) or 0)
    except (ConfigError, BadInputError) as err:
        print(f"tomrl: error: {redact_secrets(str(err))}", file=sys.stderr)
        return 2
    except OSError as err:  # the file system or the network: unwritable --out, a full disk, no connection
        if os.environ.get("TOMRL_TRACEBACK"):
            raise
        print(f"tomrl: error: {redact_secrets(describe_disk_full(err, args) or describe_os_error(err))}", file=sys.stderr)
        return 2
    except RecursionError:
        if os.environ.get("TOMRL_TRACEBACK"):
            raise
        print("tomrl: error: an input is nested too deeply to read (deeply nested JSON or YAML?)", file=sys.stderr)
        return 2
    except NotImplementedError as err:
        print(f"tomrl: {err}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("\ntomrl: interrupted.", file=sys.stderr)
        return 128 + signal.SIGINT
    except Exception as err:  # a full disk reported by a library in words (safetensors, torch.save)
        full = None if os.environ.get("TOMRL_TRACEBACK") else describe_disk_full(err, args)
        if full is None:
            raise
        print(f"tomrl: error: {redact_secrets(full)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
