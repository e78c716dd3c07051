"""Seeded fuzzing of every verb of the command line (issue 27, item 6).

The verbs are found by walking the argparse parser of :mod:`tomrl.cli` (sub-parsers and their
actions), so a new verb or flag is fuzzed without a change here. For each verb, hypothesis draws an
argv from the verb's own flags, each with a value drawn by its kind: known-good values, bad numbers
(-1, 0, NaN, 1e30), empty strings, a missing file, a folder, a real input file, ``/dev/null``, an
output that is one of the inputs, unknown ``key=value`` overrides and the verb's config keys with
bad values. Each argv runs in-process through :func:`tomrl.cli.main`, in a fresh copy of the inputs,
and must end with exit status 0 or 2 (1 where a verb documents it: a check that ran and failed), no
traceback, no exception other than SystemExit, and no input file changed.

Runs that pass validation stay cheap: models are the 2-layer ``tiny-qwen2`` (and ``smollm2-135m``
resolves to a copy of it in this test's ``TOMRL_HOME``), evaluations get ``--limit 2`` and 4 new
tokens unless the draw replaces them, data are small copies of the shared files (``TOMRL_DATA``).
``train``, ``demo`` and ``study`` always end with a model whose folder has no weights, so they stop
at their model check, after every other check of their flags; ``models prepare --force`` is drawn
only with an unknown name (the conversion takes minutes). The OpenAI engine points at a closed port
with no retries. Cases are drawn with ``derandomize=True`` (the same every run, about 540 in 45 s).

A longer hunt: ``TOMRL_FUZZ_SCALE=8`` draws 8 times as many cases, ``TOMRL_FUZZ_RANDOM=1`` new ones on
each run, and ``TOMRL_FUZZ_LOG=FILE`` appends each argv with its exit status and error line to FILE.
Bugs found outside the files of this test's author are in ``KNOWN_BUGS``.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import hashlib
import io
import json
import os
import re
import shutil
import signal
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, assume, example, given, settings
from hypothesis import strategies as st

from tomrl.cli import build_parser, main
from tomrl.config import describe

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
CASE_LIMIT_S = 45  # one argv; a case over this started work it should not have (a strategy to tighten)


# ----------------------------------------------------------------------------- the verbs


def walk_verbs(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """``(verb path, parser)`` for every leaf verb: ``("data", "check")``, ``("train",)`` …"""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk_verbs(sub, path + (name,))
            return
    yield path, parser


PARSER = build_parser()
VERBS = dict(walk_verbs(PARSER))


def _config_classes() -> dict[tuple[str, ...], type]:
    from tomrl.demo import DemoConfig
    from tomrl.evaluation.config import EvalConfig
    from tomrl.generators.config import GenerateConfig
    from tomrl.study.config import StudyConfig
    from tomrl.training.config import TrainConfig

    return {
        ("data", "generate"): GenerateConfig, ("data", "neutrality"): GenerateConfig, ("train",): TrainConfig,
        ("plan",): TrainConfig, ("export", "verl"): TrainConfig, ("eval",): EvalConfig, ("study",): StudyConfig,
        ("demo",): DemoConfig,
    }


CONFIG_CLASSES = _config_classes()
ALL_KEYS = sorted({row[0] for cls in set(CONFIG_CLASSES.values()) for row in describe(cls)})

# ----------------------------------------------------------------------------- values by kind
# Paths are relative to the case folder, which holds a fresh copy of the inputs under in/.

ROWS, BAD_ROWS, SCORED, MISSING = "in/rows.jsonl", "in/bad.jsonl", "in/scored.jsonl", "in/missing.jsonl"
FOLDER, DEVNULL = "in/empty", "/dev/null"
EVAL_RUN, BROKEN_MODEL, MINI_DATA = "in/eval_run", "in/broken_model", "in/mini_data"
UNDER_A_FILE = "in/rows.jsonl/x.jsonl"
TINY = "tiny-qwen2"

INTS = ["1", "2", "0", "-1", "nan", "1e30", "", "x", "2.5"]
SEEDS = INTS + ["4294967296", "99999999999"]
FLOATS = ["0.5", "1", "0", "-1", "nan", "inf", "-inf", "1e30", "", "x"]
STRINGS = ["x", "", "-1", "nan", "a=b", "ü", " ", ROWS]
INPUT_FILES = [ROWS, BAD_ROWS, MISSING, FOLDER, DEVNULL, "", SCORED, UNDER_A_FILE]
OUTPUTS = ["out/new.jsonl", "out/new", "", FOLDER, ROWS, DEVNULL, UNDER_A_FILE, EVAL_RUN, "out/a/b/c.json"]
MODELS = [TINY, "smollm2-135m", BROKEN_MODEL, "in/missing_model", "", "no-such-org/no-such-model"]
YAML_FILES = {"generate": "in/generate.yaml", "train": "in/train.yaml", "eval": "in/eval.yaml", "study": "in/study.yaml",
              "demo": "in/demo.yaml", "accelerate": "in/accelerate.yaml"}
BAD_CONFIGS = ["in/broken.yaml", "in/unknown_key.yaml", "in/missing.yaml", DEVNULL, FOLDER, "", ROWS]
OVERRIDE_VALUES = ["-1", "0", "1", "nan", ".inf", "1e30", "1.0e30", "''", "x", "[]", "{}", "null", "true", "[1, 2]", "{a: 1}"]
UNKNOWN_OVERRIDES = ["no_such_key=1", "x", "=1", "a.b.c=2", "model", "seed=1=2", "orders=[0"]

# Values for a flag, by its dest; other flags get values by their kind.
BY_DEST: dict[str, list[str]] = {
    "benchmark": ["hitom", "tomi", ROWS, BAD_ROWS, MISSING, FOLDER, DEVNULL, "", "hitomm", "hitom600", "tomrl-hitom-order1",
                  "paper", "hitom600,tomrl-hitom-order2", "recipe:tomrl-clean:test", "recipe:nope", "gsm8k"],
    "name": ["hitom", "tomi", "exploretom", "opentom", "fantom", "recipe:tomrl-clean", "recipe:nope", "nope", "", "smollm2-135m"],
    "options": ["split=test", "orders=[1]", "nope=1", "x", "=", "split=nope", "limit=nan"],
    "data": [MINI_DATA, FOLDER, "in/missing", ROWS, "", ROWS, BAD_ROWS, DEVNULL],
    "path": [ROWS, BAD_ROWS, MISSING, FOLDER, DEVNULL, "", f"{MINI_DATA}/hitom", f"{MINI_DATA}/tomi/tomi_test.jsonl"],
    "train": [ROWS, BAD_ROWS, MISSING, FOLDER, DEVNULL, "", "hitom", "tomi", "nope"],
    "test": [ROWS, BAD_ROWS, MISSING, FOLDER, DEVNULL, "", "hitom", "tomi", "nope"],
    "input": [SCORED, ROWS, BAD_ROWS, MISSING, FOLDER, DEVNULL, ""],
    "resume": [FOLDER, "in/missing", EVAL_RUN, ROWS, ""],
    "seeds": ["1,2", "1", "", "x", "1,1", "-1,2", "1e30", "1,2,3"],
    "train_option": ["n=4", "nope=1", "x", "=", "orders=[0]", "n=nan"],
    "option": ["timing=final", "contradiction_penalty=2", "contradiction_penalty=nan", "nope=1", "x", "="],
    "prefill": ["", "<think>", "x", " "],
    "title": ["", "x", "<b>t</b>"],
    "table": [EVAL_RUN, FOLDER, "in/missing", ROWS, ""],
    "run_dirs": [EVAL_RUN, FOLDER, "in/missing", ROWS, "", DEVNULL],
    "study": [EVAL_RUN, FOLDER, "in/missing", ROWS, ""],
    "demo": [EVAL_RUN, FOLDER, "in/missing", ""],
    "model": MODELS + [f"t={TINY}", f"={TINY}", "t=", f"a={BROKEN_MODEL}", f"t={TINY},u"],
    "models": MODELS + [f"t={TINY}", f"={TINY}", "t=", f"a={BROKEN_MODEL}", f"t={TINY},u"],
    "tokenizer": MODELS,
    "engine": ["hf", "openai", "vllm", "nope", ""],
    "device": ["cpu", "cuda:9", "gpu9", "", "meta"],
    "files": [ROWS, BAD_ROWS, MISSING, FOLDER, DEVNULL, "", SCORED],
    "exclude": [ROWS, BAD_ROWS, MISSING, FOLDER, DEVNULL, "", SCORED],
    "orders": ["1", "0,1", "", "x", "-1", "1,1", "9", "nan"],
    "lengths": ["1", "1,2", "", "x", "-1", "0", "4"],
    "split_fractions": ["train=0.8,test=0.2", "train=1", "train=nan,test=0.5", "", "x", "train=-1,test=2",
                        "train=0.5,validation=0.5,test=0", "test=1,test=0"],
    "config": BAD_CONFIGS,
    "train_config": [YAML_FILES["generate"], *BAD_CONFIGS],
    "accelerate": [YAML_FILES["accelerate"], *BAD_CONFIGS],
}
CONFIG_OF_VERB = {("data", "generate"): "generate", ("data", "neutrality"): "generate", ("train",): "train",
                  ("plan",): "train", ("export", "verl"): "train", ("eval",): "eval", ("study",): "study", ("demo",): "demo"}
OUTPUT_DESTS = {"out", "json_out", "markdown"}
BY_VERB_AND_DEST = {  # where a dest means something else in one verb
    (("eval",), "benchmark"): [ROWS, "hitom600", "tomrl-hitom-order1", "paper", "tom", "hitom600,tomrl-hitom-order2", BAD_ROWS,
                               MISSING, FOLDER, DEVNULL, "", "hitomm", "recipe:tomrl-clean:test", "recipe:nope", "gsm8k"],
    (("analyze", "interventions"), "data"): [ROWS, BAD_ROWS, MISSING, FOLDER, DEVNULL, "", SCORED],
    (("analyze", "probes"), "data"): [ROWS, BAD_ROWS, MISSING, FOLDER, DEVNULL, "", SCORED],
    (("analyze", "interventions"), "demo"): [FOLDER, EVAL_RUN, "in/missing", ""],
    (("analyze", "probes"), "folds"): ["2", "3", "1", "0", "-1", "x"],
    (("data", "generate"), "agents"): ["2", "3", "5", "1", "6", "0", "-1", "x"],
    (("analyze", "probes"), "demo"): [FOLDER, EVAL_RUN, "in/missing", ""],
}


def _is_output_key(key: str) -> bool:
    return key in ("out", "out_dir", "run_dir") or key.endswith((".out", ".out_dir", "_dir"))


def _is_input_key(key: str) -> bool:
    return key.endswith(("_config", "_files", "_paths", "file", "path")) and not _is_output_key(key)


# Per verb: argv put first (replaced by a drawn flag: argparse keeps the last), argv put last
# (always in force), and config keys never drawn (they would make a valid run expensive).
BASE = {
    ("eval",): ["--model", TINY, "--limit", "2", "max_new_tokens=4", "batch_size=4", "openai.max_retries=0",
                "openai.base_url=http://127.0.0.1:9/v1"],
    ("data", "generate"): ["--n", "4"],
    ("data", "neutrality"): ["--train-n", "6", "n=6"],
    ("analyze", "interventions"): ["--limit", "2", "--max-new-tokens", "2", "--answer-tokens", "1"],
    ("analyze", "probes"): ["--limit", "4", "--folds", "2", "--shuffles", "1"],
}
LAST = {("train",): [f"model={BROKEN_MODEL}"], ("demo",): [f"model={BROKEN_MODEL}"], ("study",): [f"models=[{BROKEN_MODEL}]"]}
NOT_DRAWN_KEYS = {("eval",): ("limit", "max_new_tokens", "openai."), ("train",): ("model",), ("demo",): ("model",),
                  ("study",): ("models",)}
# Flags drawn in 7 cases of 8 (what a run needs) or in 1 of 8 (an alternative to those), not 1 in 2.
USUAL = {("analyze", "interventions"): {"models", "data", "out"}, ("analyze", "probes"): {"model", "data", "out"},
         ("eval",): {"benchmark"}, ("reward", "score"): {"input"}}
RARE = {("analyze", "interventions"): {"demo"}, ("analyze", "probes"): {"demo"}, ("report",): {"study"},
        ("eval",): {"table", "list"}}
# Exit status 1 is a documented outcome of these verbs (a check that ran and failed, nothing answered).
MAY_RETURN_1 = {("data", "verify"), ("data", "neutrality"), ("plan",), ("eval",), ("report",), ("study",)}
EXAMPLES = {("train",): 20, ("demo",): 20, ("study",): 20, ("eval",): 25, ("analyze", "interventions"): 25,
            ("analyze", "probes"): 20, ("models", "prepare"): 8, ("models", "list"): 4}
DEFAULT_EXAMPLES = 40
# A whole run, tried first, where no drawn case of the fixed seed gets through every check.
GOOD_RUNS = {
    ("analyze", "interventions"): ["analyze", "interventions", "--model", TINY, "--data", ROWS, "--out", "out/i", "--limit", "2",
                                   "--max-new-tokens", "2", "--answer-tokens", "1"],
    ("analyze", "probes"): ["analyze", "probes", "--model", TINY, "--data", ROWS, "--out", "out/p", "--limit", "4", "--folds", "2",
                            "--shuffles", "1"],
}


def _flag_value(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, item in enumerate(argv[:-1]) if item == flag]


# Bugs the fuzzer found in files this test's author does not own, each with the argv that shows it:
# the fuzz leaves them out (so that it can find others) and test_known_bugs replays them as strict
# xfails, which fail once the bug is fixed (then delete the entry).
KNOWN_BUGS = {  # id: (what, verb, the argv, which drawn argv show it)
}


def _known_bug(verb: tuple[str, ...], argv: list[str]) -> bool:
    return any(bug_verb == verb and shows(argv) for _, bug_verb, _, shows in KNOWN_BUGS.values())


@dataclasses.dataclass
class Case:
    argv: list[str]
    outputs: set[str]  # values given only where the verb writes


def _values(verb: tuple[str, ...], action: argparse.Action) -> list[str]:
    dest = action.dest
    if dest == "config" and verb in CONFIG_OF_VERB:
        return [YAML_FILES[CONFIG_OF_VERB[verb]], *BAD_CONFIGS]
    if dest in OUTPUT_DESTS:
        return OUTPUTS
    if (verb, dest) in BY_VERB_AND_DEST:
        return BY_VERB_AND_DEST[verb, dest]
    if action.choices is not None:
        return [*map(str, action.choices), "nope", ""]
    if dest in BY_DEST:
        return BY_DEST[dest]
    if action.type is int:
        return SEEDS if "seed" in dest else INTS
    if action.type is float:
        return FLOATS
    return STRINGS


def _parses(action: argparse.Action, value: str) -> bool:
    """Whether argparse takes ``value`` for ``action`` (so that the verb's own checks see it)."""
    if action.choices is not None:
        return value in map(str, action.choices)
    try:
        (action.type or str)(value)
    except (ValueError, TypeError, argparse.ArgumentTypeError):
        return False
    return True


def _draw_value(draw, action: argparse.Action, values: list[str], careful: bool) -> str:
    """A value of ``values``: half the time the first (a good one), else mostly one that argparse takes;
    in a ``careful`` case the first seven times in eight, so that whole runs get through the checks."""
    if draw(st.integers(0, 7)) < (7 if careful else 4):
        return values[0]
    parsed = [value for value in values if _parses(action, value)]
    if parsed and draw(st.integers(0, 3)):
        return draw(st.sampled_from(parsed))
    return draw(st.sampled_from(values))


def _good_values(type_text: str, default_text: str) -> list[str]:
    """Values of a config key's type that its checks may accept (YAML): both booleans, small numbers,
    each option of a Literal, the default."""
    values = []
    if type_text.startswith("Literal["):
        values += re.findall(r"'([^']*)'", type_text)
    elif type_text.startswith("bool"):
        values += ["true", "false"]
    elif type_text.startswith("int"):
        values += ["1", "2"]
    elif type_text.startswith("float"):
        values += ["0.5", "1.0"]
    try:
        values.append(json.dumps(ast.literal_eval(default_text)))
    except (ValueError, SyntaxError):
        pass
    return values


@st.composite
def _override(draw, verb: tuple[str, ...], careful: bool) -> tuple[str, bool]:
    """``(key=value, is_output)``: an unknown key, or one of the verb's config keys with a value of its
    type or a bad one."""
    skip = NOT_DRAWN_KEYS.get(verb, ())
    rows = describe(CONFIG_CLASSES[verb]) if verb in CONFIG_CLASSES else [(key, "", "") for key in ALL_KEYS]
    rows = [row for row in rows if not row[0].startswith(skip)]
    if not rows or (not careful and draw(st.integers(0, 7)) == 0):
        return draw(st.sampled_from(UNKNOWN_OVERRIDES)), False
    key, type_text, default_text = draw(st.sampled_from(rows))[:3]
    if _is_output_key(key):
        return f"{key}={draw(st.sampled_from(OUTPUTS))}", True
    if _is_input_key(key):
        return f"{key}={draw(st.sampled_from([*INPUT_FILES, *BAD_CONFIGS]))}", False
    good = _good_values(type_text, default_text)
    values = good if good and (careful or draw(st.booleans())) else OVERRIDE_VALUES
    return f"{key}={draw(st.sampled_from(values))}", False


@st.composite
def cases(draw, verb: tuple[str, ...]) -> Case:
    parser = VERBS[verb]
    positionals: list[str] = []
    options: list[str] = []
    overrides: list[str] = []
    outputs: set[str] = set()
    inputs: set[str] = set()
    careful = draw(st.integers(0, 3)) == 0
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if action.dest == "overrides":  # key=value config overrides, put last
            for _ in range(draw(st.integers(0, 3))):
                item, is_output = draw(_override(verb, careful))
                overrides.append(item)
                (outputs if is_output else inputs).add(item.partition("=")[2])
            continue
        if not action.option_strings:  # a positional
            if action.nargs in ("+", None) or draw(st.booleans()):
                count = 1 if action.nargs in (None, "?") else draw(st.integers(1, 2))
                for _ in range(count):
                    value = _draw_value(draw, action, _values(verb, action), careful)
                    positionals.append(value)
                    inputs.add(value)
            continue
        chance = 7 if action.dest in USUAL.get(verb, ()) else 1 if action.dest in RARE.get(verb, ()) else 4
        if not (action.required or draw(st.integers(0, 7)) < chance):
            continue
        flag = draw(st.sampled_from(action.option_strings))
        if action.nargs == 0:
            options.append(flag)
            continue
        repeats = draw(st.integers(1, 2)) if isinstance(action, argparse._AppendAction) else 1
        for _ in range(repeats):
            count = draw(st.integers(1, 2)) if action.nargs in ("+", "*") else 1
            values = [_draw_value(draw, action, _values(verb, action), careful) for _ in range(count)]
            options += [flag, *values]
            (outputs if action.dest in OUTPUT_DESTS else inputs).update(values)
    if verb == ("models", "prepare") and "--force" in options:
        positionals = ["no-such-model"]  # a real --force converts the 135M model again: minutes
    argv = [*verb, *positionals, *BASE.get(verb, []), *options, *overrides, *LAST.get(verb, [])]
    return Case(argv, outputs - inputs)


# ----------------------------------------------------------------------------- the inputs


def _first_lines(source: Path, target: Path, count: int) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(source, "rb") as handle:
        target.write_bytes(b"".join(line for _, line in zip(range(count), handle)))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, hermetic_home, generated_examples) -> Path:
    """The inputs every case copies (``in/``) and this module's TOMRL_HOME; returns the folder holding both."""
    from tomrl.io import write_jsonl
    from tomrl.models import READY_MARKER, TINY_MODEL

    root = tmp_path_factory.mktemp("fuzz_cli")
    home = root / "home"
    (home / "models").mkdir(parents=True)
    (home / "tokenizers").symlink_to(hermetic_home / "tokenizers")
    tiny = hermetic_home / "models" / TINY_MODEL
    (home / "models" / TINY_MODEL).symlink_to(tiny)
    embedded = home / "models" / "smollm2-135m"  # the embedded name, prepared as a copy of the tiny model
    embedded.mkdir()
    for file in tiny.iterdir():
        (embedded / file.name).symlink_to(file)
    (embedded / READY_MARKER).write_text(json.dumps({"name": "smollm2-135m", "parameters": 1, "verification": {}}))

    pristine = root / "in"
    pristine.mkdir()
    hitom, tomi = generated_examples
    rows = [e.to_dict() for e in [*hitom, *tomi]]
    write_jsonl(pristine / "rows.jsonl", rows)
    write_jsonl(pristine / "scored.jsonl", [dict(row, completion=f"x</think><answer>{row['answer']}</answer>") for row in rows[:3]])
    bad = [dict(row) for row in rows[:3]]
    del bad[1]["question"]
    write_jsonl(pristine / "bad.jsonl", bad)
    (pristine / "empty").mkdir()
    (pristine / "broken_model").mkdir()
    (pristine / "broken_model" / "config.json").write_text("{}")
    (pristine / "broken.yaml").write_text("a: [1\n")
    (pristine / "unknown_key.yaml").write_text("no_such_key: 1\n")
    generate = (REPO_ROOT / "configs/generate/hitom_default.yaml").read_text().replace("n: 1000", "n: 6")
    (pristine / "generate.yaml").write_text(generate)
    train = (REPO_ROOT / "configs/train/smoke_cpu.yaml").read_text().replace("max_steps: 2", "max_steps: 1")
    (pristine / "train.yaml").write_text(train)
    (pristine / "eval.yaml").write_text(f"model: {TINY}\nbenchmarks: [{ROWS}]\nlimit: 2\nmax_new_tokens: 4\n")
    for name, source in (("study", "configs/study/smoke.yaml"), ("demo", "configs/demo/quick.yaml"),
                         ("accelerate", "configs/accelerate/multi_gpu.yaml")):
        shutil.copy(REPO_ROOT / source, pristine / f"{name}.yaml")
    for source in sorted(SHARED_DATA.rglob("*.jsonl")) if SHARED_DATA.is_dir() else []:
        _first_lines(source, pristine / "mini_data" / source.relative_to(SHARED_DATA), 24)
    (pristine / "mini_data").mkdir(exist_ok=True)
    # A finished evaluation folder (for report, eval --table, --resume, analyze --demo).
    with _in_case(root, home, "setup") as (stdout, stderr):
        code = main(["eval", "--model", TINY, "--benchmark", ROWS, "--limit", "2", "--out", "eval_run", "max_new_tokens=4"])
    assert code == 0, stderr.getvalue()
    shutil.move(root / "setup" / "eval_run", pristine / "eval_run")
    return root


class CaseTooSlow(BaseException):
    """Raised by the case's alarm; a BaseException so that no handler in tomrl turns it into an exit status."""


@contextlib.contextmanager
def _in_case(root: Path, home: Path, name: str):
    """Run in ``root/name`` (holding a fresh copy of ``root/in`` when there is one), with the module's
    TOMRL_HOME and the small data; os.environ, the working folder and torch's threads are restored after."""
    folder = root / name
    folder.mkdir()
    if (root / "in").is_dir():
        shutil.copytree(root / "in", folder / "in", symlinks=True)
    environ, cwd = dict(os.environ), os.getcwd()
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch else None
    os.environ.update(TOMRL_HOME=str(home), TOMRL_DATA=str(folder / MINI_DATA), HF_HUB_OFFLINE="1",
                      TRANSFORMERS_OFFLINE="1", TOMRL_INPUT_WAIT_S="1", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    os.environ.pop("OPENAI_API_KEY", None)
    hub = sys.modules.get("huggingface_hub.constants")  # read HF_HUB_OFFLINE when it was imported
    hub_offline = getattr(hub, "HF_HUB_OFFLINE", None)
    if hub is not None:
        hub.HF_HUB_OFFLINE = True  # a hub id fails at once instead of retrying a network that is not there
    os.chdir(folder)
    stdout, stderr = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            yield stdout, stderr
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(environ)
        if hub is not None:
            hub.HF_HUB_OFFLINE = hub_offline
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.set_num_threads(threads or torch.get_num_threads())


def _digests(folder: Path) -> dict[str, str]:
    return {str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in folder.rglob("*") if path.is_file() and not path.is_symlink()}


def run_case(root: Path, verb: tuple[str, ...], case: Case, number: int) -> None:
    name = f"case{number}"

    def expired(signum, frame):
        raise CaseTooSlow(f"{case.argv} ran over {CASE_LIMIT_S} s: it started real work; make its strategy cheaper")

    previous = signal.signal(signal.SIGALRM, expired)
    try:
        with _in_case(root, root / "home", name) as (stdout, stderr):
            before = _digests(Path("in"))
            signal.setitimer(signal.ITIMER_REAL, CASE_LIMIT_S)
            try:
                code = main(list(case.argv))
            except SystemExit as stop:  # argparse: usage errors (2) and --help (0)
                code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            after = _digests(Path("in"))
        err = stderr.getvalue()
        if os.environ.get("TOMRL_FUZZ_LOG"):  # one line per case: how far each argv got
            last = next((line for line in reversed(err.splitlines()) if "error" in line), "")
            with open(os.environ["TOMRL_FUZZ_LOG"], "a", encoding="utf-8") as log:
                log.write(json.dumps({"verb": " ".join(verb), "code": code, "argv": case.argv, "error": last[:300]}) + "\n")
        changed = sorted(f"in/{path}" for path in before if before[path] != after.get(path))
        written = [out.rstrip("/") for out in case.outputs if out]
        changed_inputs = [path for path in changed if not any(path == out or path.startswith(out + "/") for out in written)]
        allowed = {0, 2} | ({1} if verb in MAY_RETURN_1 else set())
        assert code in allowed, f"exit status {code}\nargv: {case.argv}\nstderr: {err[-3000:]}"
        assert "Traceback (most recent call last)" not in err, f"a traceback\nargv: {case.argv}\nstderr: {err[-5000:]}"
        errors = [line for line in err.splitlines() if line.startswith("tomrl: error:")]
        assert len(errors) <= 1, f"{len(errors)} error lines\nargv: {case.argv}\nstderr: {err[-3000:]}"
        if code == 2:
            assert errors or ": error: " in err, f"exit 2 without an error line\nargv: {case.argv}\nstderr: {err[-3000:]}"
        assert not changed_inputs, f"inputs changed: {changed_inputs}\nargv: {case.argv}"
    finally:
        signal.signal(signal.SIGALRM, previous)
        shutil.rmtree(root / name, ignore_errors=True)


# ----------------------------------------------------------------------------- the tests


def test_every_verb_is_found():
    """The walk finds the verbs of tomrl.cli.COMMANDS (a parser change that hid them would fuzz nothing)."""
    from tomrl.cli import COMMANDS

    expected = set()
    for verb, target in COMMANDS.items():
        expected |= {(verb, action) for action in target} if isinstance(target, dict) else {(verb,)}
    assert set(VERBS) == expected


@pytest.mark.parametrize("verb", sorted(VERBS), ids=" ".join)
def test_fuzz_verb(verb, workspace):
    counter = iter(range(10**6))
    examples = EXAMPLES.get(verb, DEFAULT_EXAMPLES) * int(os.environ.get("TOMRL_FUZZ_SCALE", "1"))

    @settings(derandomize=not os.environ.get("TOMRL_FUZZ_RANDOM"), database=None, deadline=None, max_examples=examples,
              phases=(Phase.explicit, Phase.generate, Phase.shrink), suppress_health_check=list(HealthCheck))
    @given(case=cases(verb))
    def fuzz(case):
        assume(not _known_bug(verb, case.argv))
        run_case(workspace, verb, case, next(counter))

    if verb in GOOD_RUNS:
        fuzz = example(case=Case(GOOD_RUNS[verb], {"out"}))(fuzz)

    fuzz()


@pytest.mark.parametrize(
    "bug",
    [pytest.param(bug, marks=pytest.mark.xfail(strict=True, raises=ValueError, reason=what)) for bug, (what, *_) in KNOWN_BUGS.items()],
)
def test_known_bugs(bug, workspace):
    _, verb, argv, shows = KNOWN_BUGS[bug]
    assert shows(argv)
    run_case(workspace, verb, Case(argv, {"out"}), 10**6)
