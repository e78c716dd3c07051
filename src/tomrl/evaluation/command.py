"""Evaluate a model: tomrl eval --model M --benchmark B[,B...] [--limit N] [--out DIR].

    tomrl eval --list                                                   # benchmarks and suites
    tomrl eval --model smollm2-135m --benchmark paper --limit 20        # Paper A's five columns, 20 questions each
    tomrl eval --model smollm2-135m --benchmark tom --limit 50 --greedy
    tomrl eval --model Qwen/Qwen2.5-0.5B-Instruct --engine vllm --benchmark paper max_new_tokens=4096
    tomrl eval --engine openai --model gpt-4o-mini --benchmark tomi --limit 100 openai.base_url=https://api.openai.com/v1
    tomrl eval --config configs/eval/paper_a.yaml model=./checkpoints/step-800 paper_row="0.5B + RL"
    tomrl eval --table runs/eval/A runs/eval/B                          # Table 1 of finished runs
    tomrl eval --model M --benchmark recipe:paper-b-all:test --benchmark mine.jsonl   # Paper B's 12 tasks, and a file

Writes ``samples.jsonl``, ``results.json``, ``table.md`` (and ``run.json``, ``timing.jsonl``)
into ``--out`` (default ``runs/eval/<model>-<settings hash>``). Interrupted (Ctrl-C, a crash, a
killed job), the same command resumes: finished answers are kept and not generated again.
Sampling defaults to Paper A's (temperature 0.6, top-p 0.95); ``--greedy`` decodes greedily.
Every ``EvalConfig`` key below can be given as ``key=value`` (nested: ``openai.base_url=…``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def register(parser: argparse.ArgumentParser) -> None:
    from tomrl.config import describe_text
    from tomrl.evaluation.config import EvalConfig
    from tomrl.generation.registry import engines_help

    parser.epilog = describe_text(EvalConfig)
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides, e.g. max_new_tokens=512")
    parser.add_argument("--config", help="YAML config under configs/eval/ (flags and key=value override it)")
    parser.add_argument("--model", help="embedded name, hub id, local path, or API model name")
    parser.add_argument(
        "--benchmark", "--benchmarks", dest="benchmark", action="append",
        help="benchmarks or suites (see --list), comma-separated or repeated; also a unified-schema FILE.jsonl, or "
        "recipe:NAME:SPLIT (recipe:paper-b-all:test: each test task of the recipe, Paper B's 12 for its recipes)",
    )
    parser.add_argument("--limit", type=int, help="at most N questions per benchmark, spread over orders (seeded)")
    parser.add_argument("--out", help="run folder (resumes if it holds a run with the same settings)")
    parser.add_argument("--engine", help=f"generation engine (default hf): {engines_help()}")  # checked by the config
    parser.add_argument("--skip-bad", action="store_true", help="skip bad rows of user data files (counted in results.json) instead of stopping (= skip_bad=true)")
    parser.add_argument("--greedy", action="store_true", help="greedy decoding instead of Paper A's sampling")
    parser.add_argument("--list", action="store_true", help="list benchmarks and suites, then exit")
    parser.add_argument("--table", nargs="+", metavar="RUN_DIR", help="print Paper A's Table 1 layout for finished runs, then exit")
    parser.add_argument("--all-paper-rows", action="store_true", help="with --table: also print every row of Paper A's table")


def _list_text() -> str:
    from tomrl.evaluation.benchmarks import BENCHMARKS, SUITES

    lines = ["Suites:"]
    for name, members in SUITES.items():
        lines.append(f"  {name:<22} {', '.join(members)}")
    lines.append("Benchmarks:")
    for name, bench in BENCHMARKS.items():
        extra = f" [Paper A column: {bench.paper_column}]" if bench.paper_column else ""
        lines.append(f"  {name:<22} v{bench.version} {bench.loader}, prompt {bench.prompt_for(None).style}: {bench.description}{extra}")
    from tomrl.loaders.recipes import recipe_names

    lines.append("Recipes (recipe:NAME:test evaluates each test task; recipe:NAME:validation / :train the whole split):")
    lines.append("  " + ", ".join(recipe_names()))
    lines.append("Files: any unified-schema FILE.jsonl")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from tomrl.config import ConfigError, load_config
    from tomrl.evaluation.config import EvalConfig

    if args.list:
        print(_list_text())
        return 0
    if args.table:
        from tomrl.evaluation.results import read_results, results_answered
        from tomrl.evaluation.table import markdown_table

        results, failed = [], []
        for folder in args.table:
            result = read_results(folder, "--table")
            (results if results_answered(result) > 0 else failed).append((folder, result))  # failed: not a row of zeros
        if not results:
            raise ConfigError(f"--table: no evaluation with answers to show: the results.json of {', '.join(f for f, _ in failed)} "
                              "has no answered question (a failed evaluation); run tomrl eval again on it")
        for folder, _ in failed:
            print(f"tomrl: note: --table {folder}: its results.json has no answered question (a failed evaluation); "
                  "left out of the table", file=sys.stderr)
        results = [result for _, result in results]
        print(markdown_table(results, all_paper_rows=args.all_paper_rows))
        return 0

    overrides = []
    for flag, key in (("model", "model"), ("limit", "limit"), ("out", "out"), ("engine", "engine")):
        value = getattr(args, flag)
        if value is not None:
            overrides.append(f"{key}={json.dumps(value)}")
    if args.benchmark is not None:
        names = [n.strip() for value in args.benchmark for n in value.split(",") if n.strip()]
        overrides.append(f"benchmarks={json.dumps(names)}")
    if args.greedy:
        clash = [item for item in args.overrides if item.split("=", 1)[0].strip() in ("temperature", "top_p")]
        if clash:
            raise ConfigError(f"--greedy and {clash[0]} disagree: --greedy decodes with temperature 0; drop one of them")
        overrides.append("temperature=0")
    if args.skip_bad:
        overrides.append("skip_bad=true")
    for item in args.overrides:
        if "=" not in item:
            raise ConfigError(f"unexpected argument '{item}': overrides are key=value (see tomrl eval --help)")
    cfg = load_config(EvalConfig, args.config, overrides + list(args.overrides))
    from tomrl.evaluation.runner import default_out_dir
    from tomrl.outputs import check_folder

    # First, in a second: --out is not another command's folder (run_eval checks again, for its other callers).
    check_folder(cfg.out if cfg.out is not None else default_out_dir(cfg), "eval", key="--out")
    if cfg.engine == "vllm":  # before the run folder, the data or any model: vLLM and a GPU are there
        from tomrl.generation.vllm import require_vllm

        require_vllm("engine=vllm", alternative="otherwise use engine=hf")
    if cfg.engine in ("hf", "vllm"):  # an API model's name is the server's business
        from tomrl.models import check_model_reference

        check_model_reference(cfg.model, trust_remote_code=cfg.trust_remote_code)
    if cfg.engine == "hf":
        from tomrl.models import check_device

        check_device(cfg.device)

    from tomrl.evaluation.runner import run_eval
    from tomrl.evaluation.table import markdown_table, summary_markdown

    try:
        outcome = run_eval(cfg, log=lambda message: print(message, flush=True))
    except KeyboardInterrupt:
        print(f"\ntomrl eval interrupted; finished answers are kept in {cfg.out or default_out_dir(cfg)}/samples.jsonl. "
              "Run the same command again to resume: finished items are not redone.", file=sys.stderr, flush=True)
        raise
    print()
    if outcome.written:
        print(markdown_table([outcome.results]))
        print(summary_markdown(outcome.results))
        print(f"wrote {outcome.out_dir}/results.json, samples.jsonl and table.md ({outcome.generated} answers generated now, {outcome.reused} reused)")
    else:
        print(f"tomrl: no question was answered, so {outcome.out_dir} has no results.json (a failed evaluation is not an "
              "evaluation)", file=sys.stderr)
    kept = outcome.results.get("kept_from_earlier_runs")
    if kept:
        print(f"results.json also keeps {len(kept)} benchmarks evaluated earlier in this folder and not asked for now: {', '.join(kept)}")
    if outcome.errors:
        print(f"tomrl: {len(outcome.errors)} prompts failed and were not recorded; run the same command again to retry them:", file=sys.stderr)
        from tomrl.io import redact_secrets

        for line in outcome.errors[:10]:
            print(f"  {redact_secrets(line)}", file=sys.stderr)  # an error may quote the URL, credentials and all
        return 1
    return 0 if outcome.written else 1
