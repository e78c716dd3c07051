"""Build a report from runs: tomrl report RUN_DIR... [--out DIR], or of a study: tomrl report --study DIR.

    tomrl report runs/demo                          # writes runs/demo/report/
    tomrl report runs/base_eval runs/rl_0.5b --out reports/rl_0.5b
    tomrl report --study runs/study/cpu_mini        # a `tomrl study` folder: writes runs/study/cpu_mini/report/

RUN_DIR is any folder holding training runs (``metrics.jsonl``, from ``tomrl train``) and/or
evaluations (``results.json``, from ``tomrl eval``), searched recursively. The output folder gets
``report.html`` (self-contained), ``report.md`` (same content), PNG plots and ``detectors.json``.
The detectors (reasoning collapse, entropy collapse, inverted difficulty, negative transfer, ID/OOD
divergence) are explained in docs/analysis.md; each one's evidence is in the report. With ``--study`` the folder
is a study (``grid.json``, ``runs/``, ``evals/``) and the report is the study report of
:mod:`tomrl.analysis.study_report` (generalization matrix, arm comparison, …).

Exit status: 0 when the report was written (whatever the detectors found); with
``--fail-on-detection``, 1 when any detector fired (for CI).
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dirs", nargs="*", metavar="RUN_DIR", help="training-run and/or evaluation folders")
    parser.add_argument("--study", metavar="STUDY_DIR",
                        help="report on a `tomrl study` folder instead (matrix, checkpoints, seeds, paired arm tests)")
    parser.add_argument("--out", help="output folder (default: RUN_DIR/report when one RUN_DIR is given, "
                                      "STUDY_DIR/report with --study)")
    parser.add_argument("--title", default="tomrl report", help="title of the report")
    parser.add_argument("--min-relative-drop", type=float, default=0.2,
                        help="smallest fall in response length (first vs last third of training) that counts as "
                             "collapse (default 0.2 = 20 %%)")
    parser.add_argument("--min-entropy-drop", type=float, default=0.5,
                        help="smallest fall of the policy's mean token entropy (first vs last third of training) that "
                             "counts as entropy collapse (default 0.5 = 50 %%)")
    parser.add_argument("--traces", type=int, default=6, metavar="N",
                        help="questions shown side by side, base vs trained, with the oracle's belief chain (default 6; 0: none)")
    parser.add_argument("--trace-seed", type=int, default=0, help="seed of the questions the trace viewer draws (default 0)")
    parser.add_argument("--fail-on-detection", action="store_true", help="exit 1 when any detector fired")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from tomrl.analysis.report import default_options, write_report
    from tomrl.analysis.runs import load_runs
    from tomrl.config import ConfigError

    # An empty path is not the working folder (what Path("") would read): say which argument is empty.
    if args.study is not None and not args.study.strip():
        raise ConfigError("--study: an empty path; give the folder of a `tomrl study` (holding grid.json)")
    if any(not run_dir.strip() for run_dir in args.run_dirs):
        raise ConfigError("RUN_DIR: an empty path; give training-run and/or evaluation folders")
    if args.study is not None:
        if args.run_dirs:
            raise ConfigError("give either RUN_DIRs or --study STUDY_DIR, not both")
        return _run_study(args)
    if not args.run_dirs:
        raise ConfigError("nothing to report on: give RUN_DIR... or --study STUDY_DIR")
    from tomrl.outputs import check_folder, check_outputs, mark_folder

    if args.out is not None:
        out = Path(args.out).expanduser()
    elif len(args.run_dirs) == 1:
        out = Path(args.run_dirs[0]) / "report"
    else:
        raise ConfigError("several RUN_DIRs given: say where the report goes with --out DIR")
    if not 0 <= args.min_relative_drop < 1:
        raise ConfigError(f"--min-relative-drop must be in [0, 1), got {args.min_relative_drop}")
    if not 0 <= args.min_entropy_drop < 1:
        raise ConfigError(f"--min-entropy-drop must be in [0, 1), got {args.min_entropy_drop}")
    if args.traces < 0:
        raise ConfigError(f"--traces must be 0 or more, got {args.traces}")

    out = check_folder(args.out if args.out is not None else out, "report", key="--out")  # not an eval, a train run, …
    check_outputs({"--out": out}, inputs={"RUN_DIR": args.run_dirs})
    console = Console(stderr=True)
    runs = load_runs(args.run_dirs)
    traced = f" ({len(runs.origins)} more run folder(s) traced from evaluated models)" if runs.origins else ""
    console.print(f"read {len(runs.training)} training run(s) and {len(runs.evaluations)} evaluation(s){traced}")
    for note in runs.skipped:
        console.print(f"[yellow]note:[/yellow] {note}")
    options = default_options(title=args.title, min_relative_drop=args.min_relative_drop,
                              min_entropy_drop=args.min_entropy_drop, trace_views=args.traces, trace_seed=args.trace_seed)
    for note in options.notes:
        console.print(f"[yellow]note:[/yellow] {note}")
    written = write_report(runs, out, options)
    mark_folder(out, "report")  # after the report: a failed one leaves no folder behind

    import json

    detectors = json.loads(written["detectors"].read_text(encoding="utf-8"))["detectors"]
    for result in detectors:
        qualifier = result["verdict"][len("fired"):] if result["verdict"].startswith("fired") else ""  # "(one training seed)"
        mark = f"[bold red]FIRED[/bold red]{qualifier}" if result["fired"] else result["verdict"]
        console.print(f"  {result['title']} — {result['subject']}: {mark}")
    console.print(f"report: {written['html']} and {written['markdown']}")
    fired = any(result["fired"] for result in detectors)
    return 1 if args.fail_on_detection and fired else 0


def _run_study(args: argparse.Namespace) -> int:
    from rich.console import Console

    from tomrl.analysis.study_report import write_study_report
    from tomrl.outputs import check_folder, check_outputs, mark_folder

    out = check_folder(args.out if args.out is not None else Path(args.study) / "report", "report", key="--out")
    check_outputs({"--out": out}, inputs={"--study": args.study})
    written = write_study_report(Path(args.study), out)
    mark_folder(out, "report")
    Console(stderr=True).print(f"study report: {written['html']} and {written['markdown']} (numbers: {written['json']})")
    return 0
