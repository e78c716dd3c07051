"""Train with GRPO or REINFORCE++ on TRL: tomrl train --config FILE [key=value ...].

    tomrl train --config configs/train/smoke_cpu.yaml                       # seconds, tiny model
    tomrl train --config configs/train/smoke_cpu.yaml algorithm=reinforce_pp max_steps=3
    tomrl train --config configs/train/demo_cpu.yaml                        # embedded model, curriculum
    tomrl train --config configs/train/paper_a_qwen2.5-0.5b.yaml            # Paper A (GPU)
    tomrl train --resume runs/smoke                                         # continue after a crash/Ctrl-C
    tomrl train --resume runs/smoke --fallback                              # ... its last checkpoint damaged
    accelerate launch --config_file configs/accelerate/multi_gpu.yaml -m tomrl train --config FILE

Algorithms: ``grpo`` (Paper A), ``reinforce_pp`` and ``reinforce_pp_baseline`` (OpenRLHF's
REINFORCE++, Paper B). The run folder holds config.yaml, metrics.jsonl, validation.jsonl,
samples.jsonl, tensorboard/, checkpoints/ (the latest, for --resume), best/ (best validation
accuracy) and final/. ``--resume RUN_DIR`` continues from the last complete checkpoint with the
same data order and random state; keys given with it (``max_steps=…``) override the saved config.
The checkpoint is checked first: a damaged one (a file cut short, a broken archive) stops with one
error, and ``--fallback`` sets it aside (renamed ``checkpoint-N.damaged``, never deleted) and resumes
from the previous complete checkpoint, or trains again from step 0 when there is none.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tomrl.config import ConfigError, describe_text, load_config

# Keys a resumed run may change: they alter neither the data order nor what one step optimises
# (micro_batch_size only splits the same step into other micro-batches, e.g. to save memory).
RESUMABLE_KEYS = ("max_steps", "epochs", "save_every", "keep_checkpoints", "eval", "report_to", "progress", "log_samples", "micro_batch_size")


def register(parser: argparse.ArgumentParser) -> None:
    from tomrl.training.config import TrainConfig

    parser.add_argument("--config", help="YAML file with TrainConfig keys (configs/train/*.yaml)")
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its last checkpoint")
    parser.add_argument(
        "--fallback",
        action="store_true",
        help="with --resume: set a damaged last checkpoint aside (renamed checkpoint-N.damaged, not deleted) and resume from the previous one (or step 0)",
    )
    parser.add_argument("--skip-bad", action="store_true", help="skip bad rows of data.train_files/validation_files (counted) instead of stopping (= data.skip_bad=true)")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="override config keys (nested: eval.every_steps=5)")
    parser.epilog = describe_text(TrainConfig)


def run(args: argparse.Namespace) -> int:
    import os
    import warnings

    from rich.console import Console

    from tomrl.training.config import TrainConfig

    console = Console()
    if args.fallback and not args.resume:
        raise ConfigError("--fallback goes with --resume RUN_DIR (it picks the checkpoint a resumed run starts from)")
    if args.resume:
        if args.config:
            raise ConfigError("--resume reads RUN_DIR/config.yaml; give --config only for a new run")
        for item in args.overrides:
            key = item.split("=", 1)[0].strip()
            if key.split(".")[0] not in RESUMABLE_KEYS:
                raise ConfigError(f"override '{key}' cannot change on resume (it would change the data or the steps); allowed: {', '.join(RESUMABLE_KEYS)}")
        saved = Path(args.resume) / "config.yaml"
        if not saved.exists():
            raise ConfigError(f"{args.resume}: no config.yaml; is this a tomrl run folder?")
        cfg = load_config(TrainConfig, saved, [*args.overrides, f"run_dir={args.resume}"])
    else:
        if not args.config and not args.overrides:
            raise ConfigError("give --config FILE (see configs/train/) and/or key=value overrides, or --resume RUN_DIR")
        cfg = load_config(TrainConfig, args.config, [*args.overrides, *(["data.skip_bad=true"] if args.skip_bad else [])])
    # A missing model fails here, naming the key, before a run folder or any data is made.
    from tomrl.models import check_model_reference

    check_model_reference(cfg.model)

    # Library chatter that says nothing about this run (deprecations inside TRL, weight-loading bars).
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", message=".*pin_memory.*")
    import transformers

    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    import datasets

    datasets.disable_progress_bars()

    from tomrl.training.run import CONFIG_FILE, train

    what = f"resuming {cfg.run_dir}" if args.resume else f"training {cfg.model} with {cfg.algorithm} into {cfg.run_dir}"
    main_process = int(os.environ.get("RANK", "0")) == 0  # under torchrun / accelerate launch the main process alone prints
    if main_process:
        console.rule(f"[bold]tomrl train: {what}")
    try:
        summary = train(cfg, resume=bool(args.resume), console=console, fallback=args.fallback)
    except KeyboardInterrupt:
        console.print(f"interrupted; continue from the last checkpoint with: tomrl train --resume {cfg.run_dir}")
        raise
    except Exception:
        # How to continue after a failure the user can fix (a full disk): tomrl.cli prints it. A run
        # folder without config.yaml failed while being created; the same command then starts afresh.
        if (Path(cfg.run_dir) / CONFIG_FILE).exists():
            args.continue_with = f"tomrl train --resume {cfg.run_dir}"
        raise
    from tomrl.training.run import end_distributed

    end_distributed()  # every process, before any exits
    if not main_process:
        return 0
    console.rule("[bold]done")
    console.print(f"{summary.steps} steps in {summary.seconds:.0f} s; run folder {summary.run_dir}")
    console.print(f"weights {summary.parameter_dtype}, compute {summary.precision}, {summary.processes} process(es)")
    if summary.warm_start:
        ws = summary.warm_start
        console.print(f"warm start: {ws['traces']} traces, {ws['steps']} steps, loss {ws['first_loss']:.3f} -> {ws['last_loss']:.3f}, {ws['seconds']:.0f} s")
    rows = (("base model", summary.base_validation), ("first", summary.first_validation), ("last", summary.last_validation), ("best", summary.best_validation))
    for label, row in rows:
        if row:
            acc = row["accuracy"]
            step = f" (step {row['step']})" if isinstance(row.get("step"), int) else ""
            console.print(
                f"{label} validation{step}: {100 * acc['value']:.1f} % [{100 * acc['low']:.1f}, {100 * acc['high']:.1f}] "
                f"(n={acc['n']}, scheme {row.get('scheme')})"
            )
    return 0
