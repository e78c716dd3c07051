"""What ``tomrl eval`` runs: the typed evaluation config.

    from tomrl.config import load_config
    from tomrl.evaluation.config import EvalConfig
    cfg = load_config(EvalConfig, "configs/eval/paper_a.yaml", ["limit=20", "engine=hf"])

or on the command line (flags and ``key=value`` overrides map onto the same fields):

    tomrl eval --model smollm2-135m --benchmark paper --limit 20
    tomrl eval --config configs/eval/paper_a.yaml model=Qwen/Qwen2.5-0.5B-Instruct engine=vllm

Every field below can be set in a YAML file under ``configs/eval/`` or as ``key=value``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator

from tomrl.config import ConfigError, setting
from tomrl.evaluation.benchmarks import BENCHMARKS, SUITES, check_names
from tomrl.io import redact_secrets
from tomrl.models import generation_length_problem
from tomrl.generation.base import PAPER_TEMPERATURE, PAPER_TOP_P, Sampling
from tomrl.generation.registry import engine_names, engines_help  # light: the factories import their engines lazily
from tomrl.generation.settings import OpenAISettings, VLLMSettings
from tomrl.prompts import PromptConfig


def _registered_engine(name: str) -> str:
    # Checked against the registry (not a Literal) so an engine added with register_engine is accepted.
    if name not in engine_names():
        raise ValueError(f"must be one of {', '.join(engine_names())}, got {name!r}")
    return name


@dataclass(frozen=True)
class EvalConfig:
    moved_keys: ClassVar[dict[str, str]] = {"prompt_style": "prompt.style", "prefill": "prompt.prefill"}  # named by the unknown-key error
    model: str = setting("smollm2-135m", help="model: embedded name (smollm2-135m), hub id, local path, or the API model name (engine openai)")
    benchmarks: Annotated[list[str], AfterValidator(check_names)] = setting(
        default_factory=lambda: ["paper"],
        help=f"benchmark or suite names (see `tomrl eval --list`), unified-schema .jsonl files, or recipe:NAME:SPLIT (each test "
        f"task of a recipe: recipe:paper-b-all:test gives Paper B's 12): suites {', '.join(SUITES)}; "
        f"benchmarks {', '.join(BENCHMARKS)}, or any added with tomrl.evaluation.benchmarks.register_benchmark",
    )
    limit: int | None = setting(
        None,
        help="evaluate at most this many examples per benchmark, spread evenly over orders (seeded; a larger limit "
        "later extends the same selection, so a resumed run reuses what is done); null = all",
    )
    out: str | None = setting(None, help="run folder (samples.jsonl, results.json, table.md); null = runs/eval/<model>-<settings hash>")
    engine: Annotated[str, AfterValidator(_registered_engine)] = setting(
        "hf",
        help=f"generation engine: {engines_help()}, or any name added with tomrl.generation.register_engine",
    )
    temperature: float = setting(PAPER_TEMPERATURE, help="sampling temperature (Paper A: 0.6); 0 = greedy")
    top_p: float = setting(PAPER_TOP_P, help="nucleus sampling mass (Paper A: 0.95)")
    max_new_tokens: int = setting(1024, help="generated-token budget per answer (Paper A: 4096)")
    seed: int = setting(0, help="seed of the example selection (limit) and of sampling")
    stop_at_answer: bool = setting(
        False,
        help="a speed option: end each answer right after its first '</answer>' (truncates there, so text after it is "
        "never generated or scored). Off (the default) for paper fidelity: generate to EOS or max_new_tokens, as Paper "
        "A's evaluation does, which scores the last answer tag (paper_eval) and fails text after '</answer>' (strict)",
    )
    prompt: PromptConfig | None = setting(None, help="the prompt of every benchmark that does not fix its own (gsm8k does); null = paper_a")
    batch_size: int = setting(64, help="hf engine: prompts decoded together (the CPU sweet spot for the 135M model is 32-64)")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = setting(
        "auto", help="hf engine weights and compute: auto = bf16 where the device runs it natively, else float32"
    )
    device: str | None = setting(None, help="hf engine device: cpu, cuda, cuda:1 …; null = cuda if available, else cpu")
    threads: int | None = setting(
        None,
        help="hf engine CPU threads (torch.set_num_threads); null = torch's default (one per core). On a machine "
        "busy with other jobs, 1 is often much faster: torch's threads otherwise wait on each other at every step",
    )
    hf_mode: Literal["auto", "slots", "generate"] = setting(
        "auto",
        help="hf engine path: slots (tomrl's continuous-batching decoder for Llama/Qwen2/Qwen3), generate "
        "(plain model.generate), auto = slots where supported",
    )
    trust_remote_code: bool = setting(False, help="allow model repositories to run their own code (off: never needed for Llama/Qwen)")
    data_paths: dict[str, str] = setting(
        default_factory=dict,
        help="per-benchmark data file or folder, e.g. {fantom: ~/fantom_v1.json, gsm8k: ~/gsm8k_test.jsonl}; "
        "others default to the shared data folder ($TOMRL_DATA)",
    )
    skip_bad: bool = setting(
        False,
        help="skip bad rows of user-supplied line-based data files (gsm8k JSONL) instead of stopping at the first; "
        "counted per benchmark in results.json (skipped_bad_rows) (also: tomrl eval --skip-bad)",
    )
    heldout_n: int = setting(100, help="tomrl-generated held-out sets: questions per order")
    heldout_seed: int = setting(
        1_000_003, help="seed of the tomrl-generated held-out stories (keep it different from any training-data seed)"
    )
    interval: Literal["wilson", "bootstrap"] = setting("wilson", help="95 % interval of every accuracy: Wilson score or percentile bootstrap")
    bootstrap_resamples: int = setting(2000, help="resamples of the bootstrap interval")
    paper_row: str | None = setting(
        None,
        help="the row of Paper A's Table 1 to print beside this model (e.g. '0.5B + RL' for a trained checkpoint); "
        "null = matched by model name where it is one of the paper's",
    )
    openai: OpenAISettings = setting(default_factory=OpenAISettings, help="OpenAI-compatible server settings")
    vllm: VLLMSettings = setting(default_factory=VLLMSettings, help="vLLM settings")

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"limit must be >= 1 or null, got {self.limit}")
        Sampling(temperature=self.temperature, top_p=self.top_p, max_new_tokens=self.max_new_tokens)  # its checks, said once
        if self.engine in ("hf", "vllm"):  # against the model's context, read from its config.json where it is on disk
            problem = generation_length_problem(self.model, self.max_new_tokens)
            if problem:
                raise ConfigError(f"max_new_tokens: {problem}")  # a ValueError (pydantic names the block); as itself where built directly
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be >= 1 or null, got {self.threads}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.heldout_n < 1:
            raise ValueError(f"heldout_n must be >= 1, got {self.heldout_n}")
        if self.bootstrap_resamples < 100:
            raise ValueError(f"bootstrap_resamples must be >= 100, got {self.bootstrap_resamples}")
        if self.device is not None and not re.fullmatch(r"cpu|mps|(cuda|xpu)(:\d+)?", self.device):
            raise ValueError(f"device must be cpu, cuda, cuda:N, mps or null, got {self.device!r}")


# Fields that change what a model generates; a run folder holding samples made with other
# values cannot be resumed with these (see tomrl.evaluation.runner).
GENERATION_FIELDS = ("model", "engine", "temperature", "top_p", "max_new_tokens", "seed", "stop_at_answer", "dtype", "hf_mode")


def generation_settings(cfg: EvalConfig) -> dict:
    settings = {name: getattr(cfg, name) for name in GENERATION_FIELDS}
    settings["prompt_style"] = cfg.prompt and cfg.prompt.style  # the key run folders recorded before the prompt: block
    if cfg.prompt is not None and cfg.prompt.prefill is not None:  # absent unless set, so those folders still resume
        settings["prefill"] = cfg.prompt.prefill
    if cfg.engine == "openai":
        settings["openai_api"] = cfg.openai.api
        settings["openai_base_url"] = redact_secrets(cfg.openai.base_url)  # as run.json stores it
    return settings

