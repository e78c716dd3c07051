"""Run a study, a declared grid of training runs evaluated on a task list: tomrl study --config FILE [key=value ...].

    tomrl study --config configs/study/smoke.yaml                 # about a minute: tiny random model, the whole grid
    tomrl study --config configs/study/cpu_mini.yaml              # the embedded model, 2 CPU cores, under an hour
    tomrl study --config configs/study/paper_b_mixtures.yaml      # Paper B's mixtures on Qwen2.5-7B (GPU cluster)
    tomrl study --config configs/study/smoke.yaml seeds=[0,1,2]   # grow a started grid: only the new cells run

The grid is data mixtures × arms (grpo, reinforce_pp, sft, rft, answer_only at the same number of
optimizer updates on the same stories) × seeds (× models). Each cell is trained, then its final
model (and every eval.checkpoint_every-th update's snapshot) is evaluated on the study's tasks,
as is each base model once. Started again (after Ctrl-C or a crash), the study continues where it
stopped: finished runs and evaluations are never redone. STUDY_DIR/grid.json has every cell's status.
"""

from __future__ import annotations

import argparse

from tomrl.config import describe_text, load_config


def register(parser: argparse.ArgumentParser) -> None:
    from tomrl.study.config import StudyConfig

    parser.add_argument("--config", required=True, help="YAML file with StudyConfig keys (configs/study/*.yaml, or STUDY_DIR/study.yaml)")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="override config keys (nested: eval.limit=20)")
    parser.epilog = describe_text(StudyConfig)


def run(args: argparse.Namespace) -> int:
    import warnings

    from rich.console import Console

    from tomrl.study.config import StudyConfig
    from tomrl.study.runner import run_study

    cfg = load_config(StudyConfig, args.config, args.overrides)
    # Library chatter that says nothing about the study (deprecations inside TRL, weight-loading bars).
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", message=".*pin_memory.*")
    import datasets
    import transformers

    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    datasets.disable_progress_bars()
    console = Console()
    try:
        return run_study(cfg, console)
    except KeyboardInterrupt:
        console.print(f"interrupted; continue the study with: tomrl study --config {cfg.out_dir}/study.yaml")
        raise
