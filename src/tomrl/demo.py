"""``tomrl demo``: the whole pipeline on the embedded model, evaluated honestly, with progress shown.

    tomrl demo                                   # everything, into runs/demo (about 20 minutes on 2 cores)
    tomrl demo out_dir=runs/demo2 seed=1         # key=value overrides of DemoConfig
    tomrl demo --config configs/demo/full.yaml   # the same pipeline at the size its claims need (hours on 2 cores)

Two budgets. The defaults (``configs/demo/default.yaml`` spells them out) fit ``make demo`` into
about 20 minutes on a 2-core CPU without native bf16 (where it is float32 throughout and the
evaluations run near the float32 matmul bound): 8 GRPO steps after a warm start on 64 traces, and
about 200 test questions per model. At that size most differences are reported "inconclusive"
with their n; ``configs/demo/full.yaml`` (24 steps, 96 traces, 900 questions per model: the
figures in the README) is the run whose claims have the power to stand.

Stages, each writing into ``out_dir`` (a stage whose output is already there is skipped, so a
demo stopped with Ctrl-C continues where it stopped when started again):

1. prepare the model (the embedded SmolLM2-135M: GGUF → safetensors, verified);
2. data: the training curriculum and its *dev* split (stories held out of training, same
   generator and words; used for validation during training, never reported as a test) →
   ``train/data/``; and the evaluation sets, written once to ``eval_sets/``:

   - ``dev``: the dev split (in distribution: differs from training only by its stories);
   - ``neutral``: shortcut-neutral held-out stories of orders 0-2 (held-out names, objects,
     containers and rooms; the gold drawn uniformly among the object's places after the story, so
     no rule or learner that ignores who is asked beats chance in expectation;
     ``configs/generate/hitom_neutral_test.yaml``), in the training data's story structure
     (``data.generate_overrides``: one chapter, no claims), where no order-2 question needs nesting;
   - ``neutral-orders3-4``: the same generator on orders 3-4, which training never asks, in stories of
     two or three chapters with and without claims (about half the questions need nesting);
   - ``pairs``: counterfactual minimal pairs (two stories, each one exit moved after the same move,
     gold flips), in stories of two or three chapters;
   - ``swap``: the agent-swap control (one story, the question's agents swapped, gold differs), the
     same stories;
   - ``hitom600`` / ``tomi``: a seeded selection of the real benchmarks, when their files are here;

   each set's title says what it is held out over besides stories and words;
3. audit: leakage between training and every set, the best agent-agnostic rule, the agent-blind
   learner (cross-fitted and fitted on the training data) and the partial-ToM rules per set and
   order → ``audit.md``;
4. evaluation of the base model on every set → ``eval/base/``;
5. training (supervised warm start on oracle-written traces, then GRPO) → ``train/``;
6. the same evaluation of the warm-started model and of the final RL model (``final/``, not the
   ``best/`` chosen on dev) → ``eval/warm_start/``, ``eval/rl/``;
7. the comparison (``comparison.md`` / ``.json``: base / warm start / RL beside the best no-ToM
   baseline (rules and the agent-blind learner) and the best partial-ToM rule on every set and
   order, the nesting-required questions apart, whether each model beats it, and whether RL gained over the warm
   start) and the report (HTML + Markdown + plots) → ``report/``.

Each test set is evaluated once per model, after training; nothing in it chose a checkpoint.

Every stage's settings are checked before stage 1 (:func:`check_demo`): the training config with its
overrides and its data settings, the generator config of every evaluation set (``higher_orders``,
``neutral_config`` …), ``eval_benchmarks`` against the benchmark registry and the evaluation settings;
a bad value is one error and nothing is written. A demo folder moved or copied elsewhere is continued
where it is (paths are compared as paths: :func:`tomrl.outputs.same_setting`).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path

from tomrl.config import ConfigError, describe_text, load_config, setting

REPO_CONFIGS = Path(__file__).resolve().parents[2] / "configs"
MODELS = ("base", "warm start", "RL")
# The default demo's training budget on top of configs/train/demo_cpu.yaml (24 steps, 96 traces, 60 dev
# questions validated every 6 steps): what fits 20 minutes on 2 cores. A doubled learning rate for a third
# of the steps; validation (monitoring only; the demo evaluates every model on dev itself) after steps 4 and 8.
FAST_TRAINING = (
    "max_steps=8",
    "learning_rate=1.0e-5",
    "warm_start.max_examples=64",
    "eval.at_start=false",
    "eval.every_steps=4",
    "data.validation_overrides=[n=30, 'orders=[0, 1, 2]', agents=4]",
)  # the three models every set is evaluated on, in training order


@dataclass(frozen=True)
class DemoConfig:
    model: str = setting("smollm2-135m", help="model to run the demo on: an embedded name, hub id or local path")
    out_dir: str = setting("runs/demo", help="folder for the demo's data, runs, evaluations and report")
    seed: int = setting(0, help="seed for data generation, sampling and training")
    train_config: str = setting(
        "configs/train/demo_cpu.yaml", help="training config (relative paths are tried from the working folder, then the repo)"
    )
    train_overrides: list[str] = setting(
        default_factory=lambda: list(FAST_TRAINING),
        help="key=value overrides applied to the training config (the default: the 20-minute budget; [] = the config as written)",
    )
    neutral_config: str = setting(
        "configs/generate/hitom_neutral_test.yaml",
        help="generator config of the shortcut-neutral held-out sets (held-out words); the training data's "
        "data.generate_overrides are applied on top, so the sets share the training stories' structure",
    )
    neutral_per_order: int = setting(25, help="shortcut-neutral held-out questions per trained order (0-2)")
    higher_orders: list[int] = setting(default_factory=lambda: [3, 4], help="untrained orders evaluated on the neutral generator")
    higher_per_order: int = setting(10, help="questions per untrained order")
    contrast_pairs: int = setting(12, help="counterfactual pairs, and agent-swap pairs, each (two questions per pair)")
    eval_benchmarks: list[str] = setting(
        default_factory=lambda: ["hitom600", "tomi"],
        help="real benchmarks evaluated beside the generated sets; those whose data is not on this machine are "
        "skipped with a note",
    )
    eval_limit: int = setting(20, help="questions of each real benchmark (spread over orders, seeded)")
    eval_max_new_tokens: int = setting(128, help="token budget of each evaluation answer (128: what RL trained with)")
    eval_stop_at_answer: bool = setting(
        True,
        help="speed option: stop each evaluation answer at its first '</answer>' (strict scoring is unaffected for "
        "answers that close their tag; Paper A's generate-to-EOS protocol is `tomrl eval` with stop_at_answer=false)",
    )

    def __post_init__(self) -> None:
        for name in ("eval_limit", "neutral_per_order", "higher_per_order", "contrast_pairs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="YAML file with DemoConfig keys")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="override config keys")
    parser.epilog = describe_text(DemoConfig)


def _find_config(path: str) -> Path:
    candidate = Path(path)
    if candidate.exists():
        return candidate
    in_repo = REPO_CONFIGS.parent / path
    if in_repo.exists():
        return in_repo
    raise ConfigError(f"config not found: {path} (also looked in {REPO_CONFIGS.parent})")


def run(args: argparse.Namespace) -> int:
    from tomrl.io import locked_folder
    from tomrl.outputs import check_folder

    cfg = load_config(DemoConfig, args.config, args.overrides)
    out = check_folder(cfg.out_dir, "demo", key="out_dir")  # not a study, a train run, an eval …; not ''
    with locked_folder(out, "tomrl demo"):  # a second demo on the same folder fails at once
        return _run(cfg)


DEMO_FILE = "demo.yaml"  # the settings a demo folder was started with


def check_settings(cfg: DemoConfig, out: Path) -> None:
    """Refuse to continue the demo in ``out`` with other settings than it was started with (``out_dir`` aside).

    The settings are in ``out/demo.yaml``; a demo folder made before that file existed is checked on what its
    files record: the seed (``audit.json``) and the model (``train/config.yaml``).
    """
    from tomrl.config import config_to_dict, read_yaml
    from tomrl.io import loads_json

    from tomrl.outputs import same_setting

    recorded = out / DEMO_FILE
    now = json.loads(json.dumps(config_to_dict(cfg)))
    defaults = json.loads(json.dumps(config_to_dict(DemoConfig())))  # for keys tomrl gained after the demo started
    if recorded.is_file():
        before = read_yaml(recorded)
        keys = set(before) | set(now)
    else:
        audit, train_config = out / "audit.json", out / "train" / "config.yaml"
        seed = loads_json(audit.read_bytes(), str(audit)).get("seed") if audit.is_file() else None
        model = read_yaml(train_config).get("model") if train_config.is_file() else None
        before = {key: value for key, value in (("seed", seed), ("model", model)) if value is not None}
        keys = set(before)
    # out_dir names the folder (a moved or copied demo is continued where it is); paths compare as paths.
    folder_before = before.get("out_dir") if isinstance(before.get("out_dir"), str) and before.get("out_dir") else None
    changed = sorted(k for k in keys - {"out_dir"} if not same_setting(before.get(k, defaults.get(k)), now.get(k), folder_before, str(out)))
    if changed:
        details = ", ".join(f"{k}: {before.get(k, defaults.get(k))!r} -> {now.get(k)!r}" for k in changed)
        where = f" ({recorded})" if recorded.is_file() else ""
        raise ConfigError(
            f"out_dir {out} holds a demo started with other settings ({details}); continue it with the settings it was "
            f"started with{where} or choose another out_dir"
        )


def _run(cfg: DemoConfig) -> int:
    from rich.console import Console

    from tomrl.config import save_config
    from tomrl.outputs import mark_folder

    console = Console()
    out = Path(cfg.out_dir).expanduser()
    # Every check before the first write: the folder's earlier settings, then every stage's settings.
    check_settings(cfg, out)
    train_dir = out / "train"
    train_cfg = check_demo(cfg)
    mark_folder(out, "demo")
    save_config(cfg, out / DEMO_FILE)
    started = time.time()
    stages = 7

    def stage(number: int, title: str) -> None:
        console.rule(f"[bold]tomrl demo · {number}/{stages} · {title} · {time.time() - started:.0f} s")

    # 1. The model.
    stage(1, f"prepare model {cfg.model}")
    from tomrl.models import EMBEDDED_MODELS, prepare

    model_path = str(prepare(cfg.model)) if cfg.model in EMBEDDED_MODELS else cfg.model
    console.print(f"model: {model_path}")

    # 2. Data: the curriculum and its dev split, frozen in train/data; the evaluation sets in eval_sets/.
    stage(2, "generate data")
    from tomrl.training.data import prepare_data

    train_examples, dev_examples = prepare_data(train_cfg, train_dir)
    console.print(
        f"{len(train_examples)} training and {len(dev_examples)} dev questions in {train_dir / 'data'} (seed {cfg.seed})"
    )
    eval_sets = build_eval_sets(cfg, train_cfg, dev_examples, out / "eval_sets", console)

    # 3. Audit: leakage between training and each set, and the best agent-agnostic rule on each.
    stage(3, "audit")
    from tomrl.audit.report import audit, to_markdown
    from tomrl.io import atomic_write_json, atomic_write_text

    report = audit(("train", train_examples), [(s.name, list(s.examples)) for s in eval_sets], seed=cfg.seed)
    atomic_write_text(out / "audit.md", to_markdown(report))
    atomic_write_json(out / "audit.json", report)
    for test in report["tests"]:
        console.print(f"{test['file']}: {_leak_summary(test.get('leakage'))}")

    # 4-6. Evaluation of the base model, training, evaluation of the warm-started and RL models.
    files = [str(out / "eval_sets" / f"{s.name}.jsonl") for s in eval_sets]
    stage(4, "evaluate the base model")
    _evaluate(cfg, train_cfg.prompt, cfg.model, files, out / "eval" / "base", console)
    stage(5, "train")
    summary = _train(train_cfg, train_dir, console)
    stage(6, "evaluate the warm-started and the RL model")
    from tomrl.training.sft_warmstart import WARM_START

    folders = {"base": out / "eval" / "base"}
    if (train_dir / WARM_START / "model").exists():
        _evaluate(cfg, train_cfg.prompt, str(train_dir / WARM_START / "model"), files, out / "eval" / "warm_start", console)
        folders["warm start"] = out / "eval" / "warm_start"
    _evaluate(cfg, train_cfg.prompt, str(train_dir / "final"), files, out / "eval" / "rl", console)
    folders["RL"] = out / "eval" / "rl"

    # 7. The comparison and the report.
    stage(7, "compare and report")
    from tomrl.analysis.comparison import compare, table_rows
    from tomrl.analysis.comparison import to_markdown as comparison_markdown
    from tomrl.analysis.report import default_options, write_report
    from tomrl.analysis.runs import load_runs

    comparison = compare(eval_sets, {label: _samples_by_set(folder) for label, folder in folders.items()}, train=train_examples)
    comparison["setup"] = {"seed": cfg.seed, "model": cfg.model, "training": str(train_dir), "scoring": "strict, greedy",
                           "evaluated": {label: str(folder) for label, folder in folders.items()}}
    caption = (f"tomrl demo, seed {cfg.seed}: {cfg.model}, {' → '.join(folders)} ({summary.steps} RL steps, final/), "
               "each set evaluated once per model, after training")
    atomic_write_text(out / "comparison.md", comparison_markdown(comparison, caption))
    atomic_write_json(out / "comparison.json", comparison)
    written = write_report(load_runs([train_dir, *folders.values()]), out / "report", default_options(comparison=comparison))
    _print_comparison(comparison, caption, console, table_rows, comparison_markdown)
    console.rule(f"[bold green]demo finished in {(time.time() - started) / 60:.1f} min")
    console.print(f"comparison: {out / 'comparison.md'}")
    for kind, path in written.items():
        console.print(f"report ({kind}): {path}")
    return 0


def demo_train_config(cfg: DemoConfig):
    """The training stage's config: the demo's training config, model, seed and overrides, run in ``out_dir/train``."""
    from tomrl.training.config import TrainConfig

    train_dir = Path(cfg.out_dir).expanduser() / "train"
    return load_config(
        TrainConfig,
        _find_config(cfg.train_config),
        [f"model={cfg.model}", f"run_dir={train_dir}", f"seed={cfg.seed}", *cfg.train_overrides],
    )


# The DemoConfig keys each generated evaluation set is made from (named by check_demo's errors).
EVAL_SET_KEYS = {
    "neutral": "neutral_config, neutral_per_order",
    "neutral-orders3-4": "higher_orders, higher_per_order",
    "pairs": "contrast_pairs",
    "swap": "contrast_pairs",
}


def check_demo(cfg: DemoConfig):
    """Check every stage's settings before stage 1 (seconds, nothing written); returns the training config.

    The training config with ``train_overrides`` and its data settings (the generator config of every curriculum
    stage and of the dev split), the generator config of every generated evaluation set, ``eval_benchmarks``
    against the benchmark registry and the evaluation settings. One ConfigError naming the demo key.
    """
    from tomrl.evaluation.benchmarks import BENCHMARKS
    from tomrl.evaluation.config import EvalConfig
    from tomrl.generators.config import GenerateConfig
    from tomrl.models import check_model_reference
    from tomrl.training.data import check_data
    from tomrl.training.preflight import preflight

    check_model_reference(cfg.model, key="model")
    try:
        train_cfg = demo_train_config(cfg)
    except (ConfigError, ValueError) as error:
        raise ConfigError(f"train_config + train_overrides: {_first_line(error)}") from None
    try:
        check_data(train_cfg)
        preflight(train_cfg)  # vLLM and CUDA for use_vllm, the report_to loggers' packages
    except ConfigError as error:
        raise ConfigError(f"train_config + train_overrides: {_first_line(error)}") from None
    try:
        neutral_config = _find_config(cfg.neutral_config)
    except ConfigError as error:
        raise ConfigError(f"neutral_config: {error}") from None
    for name, (_, _, _, options) in eval_set_plans(cfg, train_cfg).items():
        try:
            load_config(GenerateConfig, neutral_config, options)
        except (ConfigError, ValueError, OSError) as error:
            raise ConfigError(f"{EVAL_SET_KEYS[name]} (eval set {name}): {_first_line(error)}") from None
    for name in cfg.eval_benchmarks:
        if name not in BENCHMARKS:
            raise ConfigError(f"eval_benchmarks: unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}")
    try:
        EvalConfig(model=cfg.model, benchmarks=["eval_set.jsonl"], temperature=0.0, max_new_tokens=cfg.eval_max_new_tokens,
                   stop_at_answer=cfg.eval_stop_at_answer, seed=cfg.seed, prompt=train_cfg.prompt)
    except (ConfigError, ValueError) as error:
        raise ConfigError(f"eval_max_new_tokens, eval_stop_at_answer: {_first_line(error)}") from None
    return train_cfg


def _first_line(error: BaseException) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def eval_set_plans(cfg: DemoConfig, train_cfg) -> dict[str, tuple[str, str, list[str], list[str]]]:
    """Each generated evaluation set: ``name -> (title, held out over, shape overrides, generator options)``, the
    options being everything the neutral generator config is loaded with (in this order)."""
    # The training stories' shape (chapters, deception, distractors), not their words: the sets draw theirs
    # from the held-out pool of the neutral config.
    structure = [item for item in train_cfg.data.generate_overrides if item.split("=", 1)[0].strip() != "vocabulary"]
    # In a one-chapter story without claims a nested belief is always the first-order belief of the asked agent
    # who left first (what two agents last saw together is what the first of them to leave saw), so no question
    # there needs nesting. The sets that must test nesting (untrained orders, pairs, swaps) therefore tell stories
    # of two or three chapters whose later chapters revisit the asked object: held out over chapters as well.
    chapters = [*structure, "lengths=[2, 3]", "distractor_prob=0.0"]
    seed = cfg.seed * 1000 + 7  # never a training seed (those are seed * 1000 + stage, and + 999 for dev)
    # Five agents: with as many agents as the order, the chain is everyone and "the place after the first
    # exit" answers every question (measured: 100 % on order 4 with four agents, 56 % = chance + 8 with five).
    agents_for_higher = 5
    generated = {
        "neutral": ("shortcut-neutral held-out, orders 0-2", "stories and words", structure,
                    [f"n={3 * cfg.neutral_per_order}", "orders=[0, 1, 2]", "agents=4"]),
        "neutral-orders3-4": ("shortcut-neutral held-out, untrained orders", "orders, chapters, claims, stories and words", chapters,
                              [f"n={len(cfg.higher_orders) * cfg.higher_per_order}", f"orders={list(cfg.higher_orders)}",
                               f"agents={agents_for_higher}", "deception=[false, true]"]),
        "pairs": ("counterfactual pairs, orders 0-2", "chapters, stories and words", chapters,
                  [f"n={2 * cfg.contrast_pairs}", "orders=[0, 1, 2]", "agents=4", "pairs=true", "shortcut_neutral=true"]),
        "swap": ("agent-swap control, orders 1-2", "chapters, stories and words", chapters,
                 [f"n={2 * cfg.contrast_pairs}", "orders=[1, 2]", "agents=4", "agent_swap=true", "shortcut_neutral=false"]),
    }
    plans = {}
    for offset, (name, (title, held_out_over, shape, overrides)) in enumerate(generated.items()):
        if name == "neutral-orders3-4" and not cfg.higher_orders:
            continue
        plans[name] = (title, held_out_over, shape, [*shape, *overrides, f"seed={seed + offset}", "split_fractions={test: 1.0}"])
    return plans


def build_eval_sets(cfg: DemoConfig, train_cfg, dev_examples, folder: Path, console) -> list:
    """The demo's evaluation sets (see the module docstring), each written once to ``folder/NAME.jsonl``."""
    from dataclasses import replace

    from tomrl.analysis.comparison import EvalSet
    from tomrl.generators import generate
    from tomrl.generators.config import GenerateConfig
    from tomrl.schema import read_examples

    neutral_config = _find_config(cfg.neutral_config)
    sets = [EvalSet("dev", "dev (training distribution)", "stories only; used for validation", dev_examples)]
    _write_once(folder / "dev.jsonl", lambda: [replace(e, split="validation") for e in dev_examples])
    for name, (title, held_out_over, _, options) in eval_set_plans(cfg, train_cfg).items():
        path = folder / f"{name}.jsonl"
        _write_once(path, lambda options=options: generate(load_config(GenerateConfig, neutral_config, options)))
        if name == "neutral-orders3-4":
            title = f"shortcut-neutral held-out, untrained orders {', '.join(map(str, cfg.higher_orders))}"
        sets.append(EvalSet(name, title, held_out_over, read_examples(path)))
    for name in available_benchmarks(list(cfg.eval_benchmarks), console):
        path = folder / f"{name}.jsonl"
        _write_once(path, lambda name=name: _benchmark_selection(name, cfg))
        sets.append(EvalSet(name, _benchmark_title(name), "source, story structure and words", read_examples(path)))
    for eval_set in sets:
        console.print(f"eval set {eval_set.name}: {len(eval_set.examples)} questions ({eval_set.title})")
    return sets


def _write_once(path: Path, build) -> None:
    from tomrl.schema import write_examples

    if not path.exists():  # deterministic in the seed; written atomically, so an existing file is complete
        write_examples(path, build())


def _benchmark_selection(name: str, cfg: DemoConfig):
    from tomrl.evaluation.benchmarks import BENCHMARKS, load_examples, select

    examples = load_examples(BENCHMARKS[name], {}, heldout_n=1, heldout_seed=0)
    return select(examples, cfg.eval_limit, cfg.seed)


def _benchmark_title(name: str) -> str:
    from tomrl.evaluation.benchmarks import BENCHMARKS

    return BENCHMARKS[name].title


def _leak_summary(leakage: dict | None) -> str:
    if not leakage:
        return "not computed"
    total = leakage["total"]
    return f"{total['story_leaked']} of {total['n']} questions share a story with training"


def available_benchmarks(names: list[str], console) -> list[str]:
    """The benchmarks whose data is on this machine; the others are named and skipped."""
    from tomrl.evaluation.benchmarks import BENCHMARKS, load_examples
    from tomrl.io import BadInputError

    available = []
    for name in names:
        benchmark = BENCHMARKS.get(name)
        if benchmark is None:
            raise ConfigError(f"eval_benchmarks: unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}")
        if benchmark.loader != "tomrl-generate":  # generated sets need no files
            try:
                load_examples(benchmark, {}, heldout_n=1, heldout_seed=0)
            except BadInputError as err:
                console.print(f"[yellow]skipping {name}: {err}")
                continue
        available.append(name)
    return available


def _evaluate(cfg: DemoConfig, prompt, model: str, files: list[str], out: Path, console) -> Path:
    from tomrl.evaluation.config import EvalConfig
    from tomrl.evaluation.runner import run_eval

    eval_cfg = EvalConfig(
        model=model,
        benchmarks=files,
        limit=None,
        out=str(out),
        temperature=0.0,
        max_new_tokens=cfg.eval_max_new_tokens,
        stop_at_answer=cfg.eval_stop_at_answer,
        seed=cfg.seed,
        prompt=prompt,  # the training's
    )
    run_eval(eval_cfg, log=console.print)
    return out


def _samples_by_set(folder: Path) -> dict[str, dict[str, dict]]:
    """Evaluation rows of ``folder/samples.jsonl`` as set name -> example id -> row."""
    from tomrl.io import scan_jsonl

    by_set: dict[str, dict[str, dict]] = {}
    for _, row, error in scan_jsonl(folder / "samples.jsonl"):
        if error is None:
            by_set.setdefault(row["benchmark"].removeprefix("file-"), {})[row["id"]] = row
    return by_set


def _train(train_cfg, train_dir: Path, console):
    from tomrl.training.run import RunSummary, train

    summary_file = train_dir / "summary.json"
    if summary_file.exists() and (train_dir / "final").exists():
        console.print(f"training already finished in {train_dir}; reusing it")
        saved = json.loads(summary_file.read_text())
        saved.pop("warning", None)
        return RunSummary(**saved)
    from tomrl.training.run import CONFIG_FILE

    # A run that was started continues, even one killed before its first checkpoint (then its
    # finished warm start is kept and RL starts from step 0).
    resume = (train_dir / CONFIG_FILE).exists()
    return train(train_cfg, resume=resume, console=console)


def _print_comparison(comparison: dict, caption: str, console, table_rows, to_markdown) -> None:
    from rich.table import Table

    if not console.is_terminal:
        # Redirected to a log (make demo > demo.log): a boxed table at the default 80 columns
        # wraps every cell into unreadable fragments; the markdown table stays one line per row.
        console.print(to_markdown(comparison, caption), markup=False, highlight=False, soft_wrap=True)
        return
    columns, cells = table_rows(comparison)
    table = Table(title=caption, show_lines=False)
    for column in columns:
        table.add_column(column)
    for line in cells:
        table.add_row(*line)
    console.print(table)
    console.print("strict scoring, accuracy % [95 % Wilson interval]; the rule is the best agent-agnostic rule on the same questions")
