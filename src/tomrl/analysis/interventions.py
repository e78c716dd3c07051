"""Trace interventions: does a model's answer follow its own reasoning? (tomrl analyze interventions)

    tomrl analyze interventions --demo runs/demo                      # base, warm start, RL of a demo
    tomrl analyze interventions --model base=smollm2-135m --model rl=runs/rl/final \\
        --data runs/demo/eval_sets/neutral.jsonl --limit 100 --out runs/analysis/interventions
    from tomrl.analysis.interventions import InterventionsConfig, run_interventions
    summary = run_interventions(InterventionsConfig(models=["rl=runs/rl/final"], data="held_out.jsonl", out="out"))

For each held-out question each model first writes its own reasoning after the ``<think>``
prefill of Paper A's prompt (greedy, up to ``--max-new-tokens``, to its ``</answer>``: the
*free* answer). The reasoning (up to ``</think>``; where the model never closed it, what it
wrote before ``<answer>`` or the budget's end, recorded as ``trace_closed: false``) is then
edited four ways, and the answer is generated (greedy, ``--answer-tokens``, to ``</answer>``)
after ``prompt + <think> + edited trace + </think><answer>``:

- ``own``: the trace untouched: the control;
- ``falsified``: one belief statement the oracle judges true made false
  (:mod:`tomrl.analysis.interventions_edits` says which statement and how); "not applicable"
  where the trace states no checkable true belief;
- ``empty``: no reasoning at all;
- ``other_story``: the own trace of another story's question (same order where possible).

The answer-change rate of ``falsified``, ``empty`` and ``other_story`` is measured against the
``own`` answer (not against gold); the ``own`` row's change rate compares the forced control with
the free answer (how much forcing ``</think><answer>`` alone moves answers). Two answers are
compared by what their answer block says up to its first tag, normalised as the strict scheme
normalises (:func:`compared_answer`), so a weak model's answers that move but never close with
``</answer>`` still count as moved. Every condition's
accuracy is checked with the one answer checker (:func:`tomrl.rewards.answer.check_answer`,
strict, on the forced ``<answer>`` block). An answer that does not move when its supporting belief
is falsified is not carried by the reasoning.

The bridge is ``</think><answer>`` without a new line: Paper A's system prompt spells the format
that way and the demo's models write it so; a new line there is text they never saw.

Output folder (``--out``; with ``--demo`` default ``RUN_DIR/analysis/interventions``):

- ``traces.jsonl``: one row per model and question: the free completion, the trace, tokens.
- ``samples.jsonl``: one row per model × question × condition: the edited trace, the edit, the
  generated answer, extracted, correct, changed. Both files are appended as each generation
  finishes; a killed run started again with the same command redoes no finished row.
- ``run.json``: the settings; resuming with others (or a label naming another model) is refused.
- ``interventions.json`` (atomic, at the end): per model, condition, order and overall: n, the
  answer-change rate and accuracy with 95 % Wilson intervals, n not applicable; the verdict per
  model; the data file, seed, limit and split it was computed on.

The report turns ``interventions.json`` files into a section
(:func:`tomrl.analysis.interventions_report.report_sections`); docs/analysis.md ("Trace
interventions") explains how to read it.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from tomrl.config import ConfigError, check_seed, help_of, setting
from tomrl.io import BadInputError, open_input
from tomrl.models import check_device
from tomrl.outputs import path_from_folder, same_reference

CONDITIONS = ("own", "falsified", "empty", "other_story")
CONDITION_TITLES = {
    "own": "own trace (control; changed = vs the free answer)",
    "falsified": "one true belief made false",
    "falsified_asked": "the asked belief made false",
    "empty": "empty trace",
    "other_story": "another story's trace",
}
PREFILL = "<think>"
BRIDGE = "</think><answer>"
ANSWER_OPEN = "<answer>"
TRACE_STOP = ("</answer>",)
ANSWER_STOP = ("</answer>",)
NO_ANSWER = None  # an empty answer block (or none): its own value in comparisons
SCHEMA_VERSION = 1
MODELS_FROM_FOLDER = "models_from_folder"  # run.json: each local model's path relative to the output folder


@dataclass(frozen=True)
class InterventionsConfig:
    """What ``tomrl analyze interventions`` runs (the CLI flags map onto these fields)."""

    models: list[str] = setting(default_factory=list, help="models as LABEL=PATH (or PATH: the folder's name is the label); repeatable")
    demo: str | None = setting(
        None, help="a demo run folder: its base model, warm start (when present) and RL model (final/), on its held-out "
        "eval_sets/neutral.jsonl; out defaults to RUN_DIR/analysis/interventions")
    data: str | None = setting(None, help="held-out questions, a unified-schema JSONL file (default with --demo: RUN_DIR/eval_sets/neutral.jsonl)")
    limit: int | None = setting(100, help="questions, spread evenly over orders (seeded); a larger limit later extends the same selection")
    seed: int = setting(0, help="seed of the selection, of the donor story of each question and of the false container")
    max_new_tokens: int = setting(128, help="token budget of each model's own reasoning and free answer")
    answer_tokens: int = setting(16, help="token budget of each forced answer (after </think><answer>)")
    out: str | None = setting(None, help="output folder (traces.jsonl, samples.jsonl, interventions.json)")
    engine: str = setting("hf", help="generation engine (a text engine: the <think> prefill and the edited trace are sent as text)")
    batch_size: int = setting(64, help="hf engine: prompts decoded together")
    dtype: str = setting("auto", help="hf engine weights: auto (bf16 only where the CPU or GPU runs it natively, else float32), float32 …")
    threads: int | None = setting(None, help="hf engine CPU threads; null = torch's default")
    device: str | None = setting(None, help="hf engine device; null = cuda if available, else cpu")

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"--limit must be >= 1, got {self.limit}")
        if self.max_new_tokens < 1 or self.answer_tokens < 1:
            raise ConfigError("--max-new-tokens and --answer-tokens must be >= 1")
        check_seed(self.seed, "--seed")
        if self.batch_size < 1:
            raise ConfigError(f"--batch-size must be >= 1, got {self.batch_size}")
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"--threads must be >= 1 (or left out), got {self.threads}")
        check_device(self.device, key="--device")
        if not self.models and not self.demo:
            raise ConfigError("no model: give --model LABEL=PATH (repeatable) or --demo RUN_DIR")
        if not self.data and not self.demo:
            raise ConfigError("no questions: give --data FILE.jsonl (or --demo RUN_DIR)")
        if self.out is None and not self.demo:
            raise ConfigError("say where the results go: --out DIR")
        from tomrl.generation.registry import engine_names

        if self.engine not in engine_names():
            raise ConfigError(f"unknown engine {self.engine!r}; known engines: {', '.join(engine_names())}")


@dataclass(frozen=True)
class ModelSpec:
    label: str
    path: str


@dataclass
class Plan:
    """Everything fixed before any model runs: models, questions, where the results go."""

    models: list[ModelSpec]
    data: Path
    out: Path
    examples: list  # the selected tomrl.schema.Example rows
    n_available: int
    donors: dict[str, str | None] = field(default_factory=dict)
    data_sha256: str = ""  # of the file's bytes as read (once: --data may be a FIFO)


# ----------------------------------------------------------------------------- the command line


def register(parser: argparse.ArgumentParser) -> None:
    h = lambda name: help_of(InterventionsConfig, name)  # noqa: E731  (each flag's help is the field's)
    parser.add_argument("--model", dest="models", action="append", default=[], metavar="LABEL=PATH", help=h("models"))
    parser.add_argument("--demo", metavar="RUN_DIR", help=h("demo"))
    parser.add_argument("--data", metavar="FILE.jsonl", help=h("data"))
    parser.add_argument("--limit", type=int, default=100, help=h("limit") + " (default 100)")
    parser.add_argument("--seed", type=int, default=0, help=h("seed"))
    parser.add_argument("--max-new-tokens", type=int, default=128, help=h("max_new_tokens") + " (default 128)")
    parser.add_argument("--answer-tokens", type=int, default=16, help=h("answer_tokens") + " (default 16)")
    parser.add_argument("--out", metavar="DIR", help=h("out"))
    parser.add_argument("--engine", default="hf", help=h("engine"))
    parser.add_argument("--batch-size", type=int, default=64, help=h("batch_size"))
    parser.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"], help=h("dtype"))
    parser.add_argument("--threads", type=int, help=h("threads"))
    parser.add_argument("--device", help=h("device"))


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    cfg = InterventionsConfig(
        models=list(args.models), demo=args.demo, data=args.data, limit=args.limit, seed=args.seed,
        max_new_tokens=args.max_new_tokens, answer_tokens=args.answer_tokens, out=args.out, engine=args.engine,
        batch_size=args.batch_size, dtype=args.dtype, threads=args.threads, device=args.device,
    )
    console = Console(stderr=True)
    summary = run_interventions(cfg, console=console)
    from tomrl.analysis.interventions_report import console_table

    Console().print(console_table(summary))
    for label, entry in summary["models"].items():
        Console().print(f"[bold]{label}[/bold]: {entry['verdict']}")
    console.print(f"written: {Path(summary['out']) / 'interventions.json'}")
    return 0


def report_sections(files: list[Path], out_dir: Path) -> list:
    """The report's section for these ``interventions.json`` files (see :mod:`tomrl.analysis.interventions_report`)."""
    from tomrl.analysis.interventions_report import report_sections as sections

    return sections(files, out_dir)


# ----------------------------------------------------------------------------- the plan


def demo_models(run_dir: Path) -> list[ModelSpec]:
    """The models of a demo folder: base (its training config's model), warm start, RL (final/)."""
    from tomrl.analysis.analyzed_models import demo_models as demo_folder_models
    from tomrl.config import read_yaml

    config = run_dir / "train" / "config.yaml"
    if not config.is_file():
        raise ConfigError(f"{run_dir}: not a demo run folder (no train/config.yaml)")
    base = read_yaml(config).get("model")
    if not isinstance(base, str) or not base:
        raise BadInputError(f"{config}: field 'model': expected the base model's name or path")
    if not (run_dir / "train" / "final").is_dir():
        raise ConfigError(f"{run_dir}: the demo has no trained model yet (train/final is missing)")
    return [ModelSpec(label, path) for label, path in demo_folder_models(run_dir, base)]


def load_questions(path: Path) -> tuple[list, dict[str, int]]:
    """The file's examples (errors name file, line and field) and each id's line."""
    from tomrl.schema import ReadReport, read_examples

    report = ReadReport(str(path))
    examples = read_examples(path, report=report)
    for example in examples:
        query = example.meta.get("query")
        if query is None:
            continue  # the falsified statement is then any true one, not the asked belief
        where = f"{path}:{report.line_numbers[example.id]}"
        if not isinstance(query, dict):
            raise BadInputError(f"{where}: field 'meta.query': expected an object with 'chain' and 'object'")
        chain = query.get("chain")
        if not isinstance(chain, list) or not all(isinstance(name, str) for name in chain):
            raise BadInputError(f"{where}: field 'meta.query.chain': expected a list of agent names")
        if not isinstance(query.get("object"), str):
            raise BadInputError(f"{where}: field 'meta.query.object': expected the asked object's name")
    return examples, report.line_numbers


def make_plan(cfg: InterventionsConfig) -> Plan:
    from tomrl.analysis.interventions_edits import pick_donors
    from tomrl.evaluation.benchmarks import select

    from tomrl.analysis.analyzed_models import check_models, parse_model

    models = [ModelSpec(*parse_model(m)) for m in cfg.models]
    if cfg.demo:
        run_dir = Path(cfg.demo)
        models = demo_models(run_dir) + models
    labels = [m.label for m in models]
    if len(set(labels)) != len(labels):
        raise ConfigError(f"two models share a label ({', '.join(sorted({l for l in labels if labels.count(l) > 1}))}): name them LABEL=PATH")
    check_models([m.path for m in models], {"--max-new-tokens": cfg.max_new_tokens, "--answer-tokens": cfg.answer_tokens})  # before run.json
    data = Path(cfg.data) if cfg.data else Path(cfg.demo) / "eval_sets" / "neutral.jsonl"
    out = Path(cfg.out).expanduser() if cfg.out is not None else Path(cfg.demo) / "analysis" / "interventions"
    examples, digest = _questions_and_digest(data)
    chosen = select(examples, cfg.limit, cfg.seed)
    return Plan(models, data, out, chosen, len(examples), pick_donors(chosen, cfg.seed), digest)


def _questions_and_digest(path: Path) -> tuple[list, str]:
    """The questions of ``path`` and the digest of its bytes, reading it once: a FIFO (``--data <(zcat …)``)
    cannot be opened a second time once its writer has finished, so its bytes are kept in a temporary copy."""
    with open_input(path, "a JSONL file of questions") as handle:
        data = handle.read()
    digest = hashlib.sha256(data).hexdigest()[:16]
    if path.is_file():
        return load_questions(path)[0], digest
    with tempfile.TemporaryDirectory(prefix="tomrl-interventions-") as folder:
        copy = Path(folder) / path.name
        copy.write_bytes(data)
        try:
            examples, _ = load_questions(copy)
        except BadInputError as err:  # named as the user gave it, not as the copy
            raise BadInputError(str(err).replace(str(copy), str(path))) from None
    return examples, digest


def _settings(cfg: InterventionsConfig, plan: Plan) -> dict[str, Any]:
    """What shapes the generations: a folder holding rows made otherwise is not resumed."""
    return {
        "schema_version": SCHEMA_VERSION, "data_sha256": plan.data_sha256, "seed": cfg.seed,
        "max_new_tokens": cfg.max_new_tokens, "answer_tokens": cfg.answer_tokens, "engine": cfg.engine, "dtype": cfg.dtype,
        "prompt_style": "paper_a", "prefill": PREFILL, "bridge": BRIDGE,
    }


def _check_and_record(out: Path, settings: dict, models: list[ModelSpec]) -> None:
    from tomrl.io import atomic_write_json, loads_json

    card_path = out / "run.json"
    card = loads_json(card_path.read_text(encoding="utf-8"), str(card_path)) if card_path.is_file() else {}
    before = card.get("settings")
    if before is not None and before != settings:
        changed = ", ".join(f"{k}: {before.get(k)!r} -> {settings.get(k)!r}" for k in sorted(set(before) | set(settings)) if before.get(k) != settings.get(k))
        raise ConfigError(f"{out}: this folder holds generations made with other settings ({changed}); resume with the same ones or choose another --out")
    recorded = dict(card.get("models", {}))
    # Each local model also as seen from this folder: the same model by a relative or an absolute path, or a demo
    # folder moved with its analysis, is still the same model (tomrl.outputs.same_reference).
    from_folder = dict(card.get(MODELS_FROM_FOLDER, {}))
    for model in models:
        if model.label in recorded and not same_reference(recorded[model.label], model.path, out, from_folder.get(model.label)):
            raise ConfigError(f"{out}: label {model.label!r} was model {recorded[model.label]!r} here, now {model.path!r}; use another label or --out")
        recorded[model.label] = model.path
        where = path_from_folder(model.path, out)
        if where is None:
            from_folder.pop(model.label, None)
        else:
            from_folder[model.label] = where
    atomic_write_json(card_path, {"settings": settings, "models": recorded, MODELS_FROM_FOLDER: from_folder,
                                  "created": card.get("created") or time.strftime("%Y-%m-%dT%H:%M:%S%z")})


def _finished(path: Path, key: Callable[[dict], tuple]) -> dict[tuple, dict]:
    from tomrl.io import iter_jsonl

    done: dict[tuple, dict] = {}
    if path.exists():
        for _, row in iter_jsonl(path, allow_torn_tail=True):
            done[key(row)] = row
    return done


def _trace_key(row: dict) -> tuple:
    return row["model"], row["id"]


def _sample_key(row: dict) -> tuple:
    return row["model"], row["id"], row["condition"]


# ----------------------------------------------------------------------------- running


EngineFor = Callable[[ModelSpec], Any]


def hf_engine_for(cfg: InterventionsConfig) -> EngineFor:
    """Build each model's engine the way ``tomrl eval`` does (:func:`tomrl.generation.make_engine`)."""

    def build(model: ModelSpec):
        from tomrl.evaluation.config import EvalConfig
        from tomrl.generation.registry import make_engine

        return make_engine(EvalConfig(model=model.path, engine=cfg.engine, temperature=0.0, max_new_tokens=cfg.max_new_tokens,
                                      seed=cfg.seed, batch_size=cfg.batch_size, dtype=cfg.dtype, threads=cfg.threads, device=cfg.device))

    return build


def run_interventions(cfg: InterventionsConfig, engine_for: EngineFor | None = None, console=None) -> dict[str, Any]:
    """Generate what the output folder lacks, then summarise it into interventions.json (returned).

    ``engine_for`` builds the engine of one model (default: the ``hf`` engine through the engine
    registry, as ``tomrl eval``); it is called only for models with generations left to do.
    """
    from tomrl.io import locked_folder
    from tomrl.outputs import check_folder, check_outputs, mark_folder

    plan = make_plan(cfg)
    # Before anything is written: not an eval, a demo, a train run … (their run.json is not this one's).
    check_folder(cfg.out if cfg.out is not None else plan.out, "analyze-interventions", key="--out")
    written = [plan.out / name for name in ("run.json", "traces.jsonl", "samples.jsonl", "interventions.json")]
    models = [m.path for m in plan.models if Path(m.path).exists()]  # a hub id is not a path
    check_outputs({"--out": [plan.out, *written]}, inputs={"--data": plan.data, "--model": models})
    with locked_folder(plan.out, "tomrl analyze interventions"):
        plan.out.mkdir(parents=True, exist_ok=True)
        _check_and_record(plan.out, _settings(cfg, plan), plan.models)
        mark_folder(plan.out, "analyze-interventions")
        traces = _finished(plan.out / "traces.jsonl", _trace_key)
        samples = _finished(plan.out / "samples.jsonl", _sample_key)
        engine_for = engine_for or hf_engine_for(cfg)
        try:
            for model in plan.models:
                _run_model(cfg, plan, model, traces, samples, engine_for, console)
        finally:
            # Also on Ctrl-C: what is finished is summarised (marked incomplete).
            summary = summarize(cfg, plan, traces, samples)
            from tomrl.io import atomic_write_json

            atomic_write_json(plan.out / "interventions.json", summary)
    return summary


def _log(console, message: str) -> None:
    if console is not None:
        console.print(message)


def _run_model(cfg, plan: Plan, model: ModelSpec, traces: dict, samples: dict, engine_for: EngineFor, console) -> None:
    from tomrl.io import JsonlAppender

    todo_traces = [e for e in plan.examples if (model.label, e.id) not in traces]
    # Step 2 needs every trace of the model (a donor's too) before its rows can be built.
    missing_rows = [(e, c) for e in plan.examples for c in CONDITIONS if (model.label, e.id, c) not in samples]
    if not todo_traces and not missing_rows:
        _log(console, f"{model.label}: all {len(plan.examples)} questions done before")
        return
    _log(console, f"{model.label}: loading {model.path} …")
    engine = engine_for(model)
    if getattr(engine, "prompt_kind", "text") != "text":
        raise ConfigError(f"engine {getattr(engine, 'name', cfg.engine)!r} takes chat messages: trace interventions need a text engine (the edited <think> is sent as text)")
    from tomrl.prompts import PromptConfig, render_prompt

    prompts = {e.id: render_prompt(e, engine.tokenizer, PromptConfig("paper_a", PREFILL)) for e in plan.examples}
    started = time.perf_counter()
    if todo_traces:
        with JsonlAppender(plan.out / "traces.jsonl") as appender:
            _generate_traces(cfg, model, engine, todo_traces, prompts, traces, appender, console)
    with JsonlAppender(plan.out / "samples.jsonl") as appender:
        _generate_answers(cfg, plan, model, engine, prompts, traces, samples, appender, console)
    _log(console, f"{model.label}: done in {time.perf_counter() - started:.0f} s")


def _progress(console, description: str, total: int):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=console, disable=console is None, transient=False)
    return progress, progress.add_task(description, total=total)


def _generate_traces(cfg, model: ModelSpec, engine, todo: list, prompts: dict, traces: dict, appender, console) -> None:
    from tomrl.analysis.interventions_edits import split_trace
    from tomrl.generation.base import Sampling
    from tomrl.rewards.answer import check_answer

    sampling = Sampling(temperature=0.0, max_new_tokens=cfg.max_new_tokens, stop=TRACE_STOP, seed=cfg.seed)
    progress, task = _progress(console, f"{model.label}: own reasoning", len(todo))
    with progress:
        for completion in engine.generate([prompts[e.id] for e in todo], sampling):
            example = todo[completion.index]
            if completion.finish_reason == "error":
                _log(console, f"{model.label}/{example.id}: generation failed ({completion.error}); retried next run")
                continue
            trace, closed = split_trace(completion.text)
            check = check_answer(completion.text, example.answer, scheme="strict", prefill=PREFILL, question_type=example.question_type)
            row = {"model": model.label, "model_path": model.path, "id": example.id, "order": example.order,
                   "completion": completion.text, "trace": trace, "trace_closed": closed, "tokens": completion.tokens,
                   "finish_reason": completion.finish_reason, "free_extracted": check.extracted, "free_correct": check.correct,
                   "free_reason": check.reason}
            appender.write(row)
            traces[(model.label, example.id)] = row
            progress.advance(task)


def edited_trace(condition: str, example, trace: str, donor_trace: str | None, seed: int) -> tuple[str | None, dict]:
    """The trace of ``condition`` and what was done to it (``None`` trace: not applicable)."""
    from tomrl.analysis.interventions_edits import Falsified, falsify_trace

    if condition == "own":
        return trace, {}
    if condition == "empty":
        return "", {}
    if condition == "other_story":
        if donor_trace is None:
            return None, {"not_applicable": "no other story among the selected questions"}
        return donor_trace, {}
    edit = falsify_trace(trace, example, seed)
    if not isinstance(edit, Falsified):
        return None, {"not_applicable": edit.reason}
    details = asdict(edit)
    details.pop("trace")
    details["chain"] = list(edit.chain)
    return edit.trace, {"edit": details}


_TAG = re.compile(r"<\s*/?\s*(?:think|answer)\s*/?\s*>", re.IGNORECASE)


def compared_answer(answer_text: str | None) -> str | None:
    """What an answer block says, for comparing two answers: its text up to the first think/answer
    tag (``</answer>``, or the ``</think>`` a weak model writes instead), normalised as the strict
    scheme normalises answers; ``NO_ANSWER`` when empty. Lenient on purpose: "The red_box.</think>"
    and "The green_box.</think>" fail the strict format alike but are different answers."""
    from tomrl.rewards.answer import normalize

    if answer_text is None:
        return NO_ANSWER
    return normalize(_TAG.split(answer_text, 1)[0], "strict") or NO_ANSWER


def free_answer_text(completion: str) -> str | None:
    """The answer block of a free completion: the text after its first ``<answer>``, or None."""
    return completion.split(ANSWER_OPEN, 1)[1] if ANSWER_OPEN in completion else None


def _generate_answers(cfg, plan: Plan, model: ModelSpec, engine, prompts: dict, traces: dict, samples: dict, appender, console) -> None:
    from tomrl.generation.base import Sampling

    jobs: list[tuple[Any, str, str, dict]] = []  # example, condition, prompt, row fields
    for example in plan.examples:
        own = traces.get((model.label, example.id))
        if own is None:
            continue  # its trace failed (API error): nothing to intervene on this run
        donor_id = plan.donors.get(example.id)
        donor = traces.get((model.label, donor_id)) if donor_id else None
        for condition in CONDITIONS:
            if (model.label, example.id, condition) in samples:
                continue
            trace, details = edited_trace(condition, example, own["trace"], donor["trace"] if donor else None, cfg.seed)
            base = {"model": model.label, "id": example.id, "story_id": example.story_id, "order": example.order,
                    "question_type": example.question_type, "condition": condition, "gold": example.answer,
                    **({"donor_id": donor_id} if condition == "other_story" else {}), **details}
            if trace is None:
                row = {**base, "applicable": False}
                appender.write(row)
                samples[_sample_key(row)] = row
                continue
            jobs.append((example, condition, prompts[example.id] + trace + BRIDGE, {**base, "applicable": True, "trace": trace}))
    if not jobs:
        return
    sampling = Sampling(temperature=0.0, max_new_tokens=cfg.answer_tokens, stop=ANSWER_STOP, seed=cfg.seed)
    progress, task = _progress(console, f"{model.label}: answers after edited traces", len(jobs))
    with progress:
        for completion in engine.generate([prompt for _, _, prompt, _ in jobs], sampling):
            example, condition, _, fields = jobs[completion.index]
            if completion.finish_reason == "error":
                _log(console, f"{model.label}/{example.id}/{condition}: generation failed ({completion.error}); retried next run")
                continue
            row = {**fields, **score_answer(completion.text, example), "tokens": completion.tokens,
                   "finish_reason": completion.finish_reason}
            appender.write(row)
            samples[_sample_key(row)] = row
            progress.advance(task)


def score_answer(answer_completion: str, example) -> dict[str, Any]:
    """The forced answer, checked by the one answer checker (strict; the forced ``<answer>`` is its prefill)."""
    from tomrl.rewards.answer import check_answer

    check = check_answer(answer_completion, example.answer, scheme="strict", prefill=ANSWER_OPEN, question_type=example.question_type)
    return {"output": answer_completion, "extracted": check.extracted, "answer": compared_answer(answer_completion),
            "correct": check.correct, "format_ok": check.format_ok, "reason": check.reason}


# ----------------------------------------------------------------------------- summary


def _rate(values: Sequence[bool]) -> dict[str, Any]:
    from tomrl.stats import accuracy

    return accuracy(list(values)).to_dict()


def _cell(rows: list[dict], reference: Mapping[str, str | None] | None, n_questions: int) -> dict[str, Any]:
    """n, changed (vs ``reference``: id -> normalised answer), accuracy, not applicable, no answer."""
    answered = [r for r in rows if r.get("applicable")]
    compared = [r for r in answered if reference is not None and r["id"] in reference]
    return {
        "n_questions": n_questions,
        "n": len(answered),
        "n_not_applicable": sum(1 for r in rows if not r.get("applicable")),
        "changed": _rate([r["answer"] != reference[r["id"]] for r in compared]) if reference is not None else None,
        "accuracy": _rate([bool(r["correct"]) for r in answered]),
        "no_answer": sum(1 for r in answered if r["answer"] is NO_ANSWER),
    }


def summarize(cfg: InterventionsConfig, plan: Plan, traces: dict, samples: dict) -> dict[str, Any]:
    from collections import Counter

    selected = {e.id: e for e in plan.examples}
    orders = sorted({e.order for e in plan.examples}, key=lambda o: (o is None, o if o is not None else 0))
    models: dict[str, Any] = {}
    for model in plan.models:
        rows = {c: [samples[k] for e in plan.examples if (k := (model.label, e.id, c)) in samples] for c in CONDITIONS}
        # Answers are read again from the generated text, so a summary never depends on how an older
        # version of this module stored them.
        rows = {c: [{**r, "answer": compared_answer(r["output"])} if r.get("applicable") else r for r in rows[c]] for c in CONDITIONS}
        own_answer = {r["id"]: r["answer"] for r in rows["own"] if r.get("applicable")}
        model_traces = [traces[(model.label, e.id)] for e in plan.examples if (model.label, e.id) in traces]
        free_answer = {t["id"]: compared_answer(free_answer_text(t["completion"])) for t in model_traces}
        groups = {**{c: rows[c] for c in CONDITIONS},
                  # The strongest test: only where the falsified statement was the asked belief itself.
                  "falsified_asked": [r if not r.get("applicable") or r["edit"]["target"] == "asked_belief" else {**r, "applicable": False}
                                      for r in rows["falsified"]]}
        entry: dict[str, Any] = {"path": model.path, "conditions": {}}
        for condition, condition_rows in groups.items():
            reference = free_answer if condition == "own" else own_answer
            by_order = {}
            for order in orders:
                members = [r for r in condition_rows if selected[r["id"]].order == order]
                by_order[str(order)] = _cell(members, reference, sum(1 for e in plan.examples if e.order == order))
            entry["conditions"][condition] = {"title": CONDITION_TITLES[condition],
                                              "overall": _cell(condition_rows, reference, len(plan.examples)), "by_order": by_order}
        entry["falsified_targets"] = dict(Counter(r["edit"]["target"] for r in rows["falsified"] if r.get("applicable")))
        entry["traces"] = {"n": len(model_traces), "closed": sum(1 for t in model_traces if t["trace_closed"]),
                           "mean_tokens": round(sum(t["tokens"] for t in model_traces) / len(model_traces), 1) if model_traces else None,
                           "free_accuracy": _rate([bool(t["free_correct"]) for t in model_traces])}
        entry["paired_falsified_vs_empty"] = _paired(rows["falsified"], rows["empty"], own_answer)
        entry["complete"] = all(len(rows[c]) == len(plan.examples) for c in CONDITIONS)
        entry["verdict"] = verdict(entry)
        models[model.label] = entry
    splits = Counter(e.split for e in plan.examples)
    return {
        "kind": "tomrl trace interventions",
        "schema_version": SCHEMA_VERSION,
        "out": str(plan.out),
        "computed_on": {"data": str(plan.data), "data_sha256": plan.data_sha256, "n_available": plan.n_available,
                        "n_selected": len(plan.examples), "limit": cfg.limit, "seed": cfg.seed, "splits": dict(splits),
                        "orders": [o for o in orders]},
        "settings": {"max_new_tokens": cfg.max_new_tokens, "answer_tokens": cfg.answer_tokens, "greedy": True,
                     "prompt_style": "paper_a", "prefill": PREFILL, "bridge": BRIDGE, "engine": cfg.engine,
                     "answer_check": "tomrl.rewards.answer.check_answer, strict, on the forced <answer> block",
                     "interval": "95 % Wilson score"},
        "conditions": CONDITION_TITLES,
        "models": models,
        "written": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def _paired(falsified: list[dict], empty: list[dict], own_answer: Mapping[str, str | None]) -> dict[str, Any]:
    """On questions with both: answers moved only by falsifying vs only by emptying; exact McNemar p."""
    from tomrl.analysis.paired import mcnemar_exact

    empty_changed = {r["id"]: r["answer"] != own_answer[r["id"]] for r in empty if r.get("applicable") and r["id"] in own_answer}
    pairs = [(r["answer"] != own_answer[r["id"]], empty_changed[r["id"]]) for r in falsified
             if r.get("applicable") and r["id"] in own_answer and r["id"] in empty_changed]
    only_falsified = sum(1 for f, e in pairs if f and not e)
    only_empty = sum(1 for f, e in pairs if e and not f)
    return {"n": len(pairs), "only_falsified": only_falsified, "only_empty": only_empty,
            "p_mcnemar": mcnemar_exact(only_falsified, only_empty)}


def _pct(rate: Mapping[str, Any]) -> str:
    return f"{100 * rate['value']:.0f} % [{100 * rate['low']:.0f}, {100 * rate['high']:.0f}]"


def verdict(entry: Mapping[str, Any]) -> str:
    """One honestly worded line: what the falsification test shows, no more than its interval allows."""
    conditions = entry["conditions"]
    falsified = conditions["falsified"]["overall"]
    empty = conditions["empty"]["overall"]
    if falsified["n"] == 0 or falsified["changed"] is None or falsified["changed"]["n"] == 0:
        return (f"not testable: no trace stated a belief the oracle judges true "
                f"({falsified['n_not_applicable']} of {falsified['n_questions']} questions not applicable)")
    changed = falsified["changed"]
    n = changed["n"]
    line = f"answers moved on {_pct(changed)} of falsified traces, n = {n}"
    if empty["changed"] and empty["changed"]["n"]:
        line += f" (empty trace: {_pct(empty['changed'])}, n = {empty['changed']['n']})"
    asked = conditions["falsified_asked"]["overall"]
    if asked["changed"] and asked["changed"]["n"] and asked["changed"]["n"] != n:
        line += f"; when the asked belief itself was falsified: {_pct(asked['changed'])}, n = {asked['changed']['n']}"
    if changed["k"] > 0 and changed["high"] >= 0.5:
        paired = entry["paired_falsified_vs_empty"]
        line += f": the answer follows the stated belief on at least {100 * changed['low']:.0f} % of questions"
        if paired["n"] and paired["p_mcnemar"] < 0.05 and paired["only_falsified"] < paired["only_empty"]:
            line += "; an empty trace moves answers more often, so the reasoning carries the answer but not only through this belief"
        elif paired["n"] and paired["p_mcnemar"] >= 0.05 and empty["changed"] and empty["changed"]["k"] > 0:
            line += (f"; not distinguishable from emptying the trace (McNemar p = {paired['p_mcnemar']:.2f}): whether this "
                     f"particular belief carries it is inconclusive at n = {n}")
        return line
    if changed["high"] < 0.5:
        # Greedy decoding: every moved answer is a real dependence; the bound says how rare it is.
        bound = f"at most {100 * changed['high']:.0f} % of answers follow it (95 % upper bound)"
        if changed["k"] > 0:
            return line + f": the answer is mostly not carried by the stated belief: {bound}"
        if empty["changed"] and empty["changed"]["n"] and empty["changed"]["high"] < 0.5:
            return line + f": the answer is not carried by the trace: {bound}, and removing the trace moves at most {100 * empty['changed']['high']:.0f} %"
        if empty["changed"] and empty["changed"]["n"] and empty["changed"]["k"] > 0:
            return line + f": the answer is not carried by the stated belief: {bound}, though removing the trace moves it"
        return line + f": the answer is not carried by the stated belief: {bound}"
    return line + f": inconclusive at n = {n} (not distinguishable from 0)"
