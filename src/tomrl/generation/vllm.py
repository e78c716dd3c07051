"""vLLM as an engine (GPU), the way Paper A evaluated: temperature 0.6, top-p 0.95, one sample.

    pip install 'tomrl[vllm]'                         # a vLLM that TRL 1.16 and tomrl's pins support
    tomrl eval --engine vllm --model Qwen/Qwen2.5-0.5B-Instruct --benchmark paper max_new_tokens=4096

:func:`require_vllm` checks, without importing vLLM, that a supported vLLM and a CUDA GPU are
there; ``tomrl eval engine=vllm`` and ``tomrl train use_vllm=true`` call it before any model loads.

Prompts are rendered here with the model's own tokenizer (prefill included) and passed to
``LLM.generate`` as text, so they are byte for byte what the ``hf`` engine sees. Each prompt gets
its own sampling seed (``Sampling.seeds``; ``tomrl eval`` derives one per question, so a resumed
run draws the same answers), so a sampled answer does not depend on which other prompts share its
batch. Generation ends at EOS, the token budget, or right after a ``Sampling.stop`` string (kept in
the output; ``</answer>`` with ``stop_at_answer``). Prompts go to vLLM in chunks of
``CHUNK`` so that finished answers reach ``samples.jsonl`` while the rest are still running.
Completions carry vLLM's generated token ids; ``Sampling.logprobs`` is not filled here (vLLM's
default log-probabilities are of the unscaled logits, not of ``logits / temperature``).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from typing import Iterator, Sequence

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from tomrl.config import ConfigError
from tomrl.generation.base import Completion, Sampling

CHUNK = 512

# The vLLM releases tomrl runs with; pyproject's `vllm` extra says the same (a test compares them).
# TRL 1.16 supports 0.22.0 to 0.31.0 (trl/import_utils.py, is_vllm_available); vLLM pins torch
# exactly and only 0.27.0 onwards pins tomrl's torch==2.13.0; 0.31.0 asks for transformers<5.18,
# below tomrl's transformers==5.23.0.
SUPPORTED_VLLM = ">=0.27.0,<0.31"
INSTALL_VLLM = "pip install 'tomrl[vllm]'"


def vllm_version_problem(version: str | None) -> str | None:
    """What is wrong with vLLM ``version`` (None: not installed) for tomrl, or None when it is supported.

    A local build tag (``0.30.0+cu129``) or a pre-release counts as its release, as in TRL's own check.
    """
    wanted = f"vLLM {SUPPORTED_VLLM}"
    if version is None:
        return f"{wanted} (not installed: {INSTALL_VLLM})"
    try:
        release = Version(Version(version).base_version)
    except InvalidVersion:
        return f"{wanted} (found an unreadable version {version!r}: {INSTALL_VLLM})"
    if release not in SpecifierSet(SUPPORTED_VLLM):
        return f"{wanted} (found {version}: {INSTALL_VLLM} installs a supported one)"
    return None


def installed_vllm_version() -> str | None:
    """The installed vLLM's version, read from its package metadata (vLLM itself is not imported)."""
    if importlib.util.find_spec("vllm") is None:
        return None
    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return None


def require_vllm(purpose: str, alternative: str = "") -> None:
    """Raise a one-line ConfigError unless a supported vLLM is installed and torch sees a CUDA GPU.

    ``purpose`` names what asked (``engine=vllm``), ``alternative`` how to do without vLLM. Both
    problems are named at once, so that a CPU machine is not first sent to install vLLM.
    """
    import torch  # seconds to import: only when the check runs, as in tomrl.models.check_device

    problems = [problem] if (problem := vllm_version_problem(installed_vllm_version())) else []
    if not torch.cuda.is_available():
        problems.append("a CUDA GPU (torch sees none)")
    if problems:
        raise ConfigError(f"{purpose} needs {' and '.join(problems)}" + (f"; {alternative}" if alternative else ""))


class VLLMEngine:
    name = "vllm"
    prompt_kind = "text"

    def __init__(self, model: str, dtype: str = "auto", seed: int = 0, settings=None, trust_remote_code: bool = False):
        require_vllm("engine=vllm", alternative="otherwise use engine=hf")
        from vllm import LLM

        from tomrl.models import resolve_model

        self.model_name = model
        self.settings = settings
        kwargs = {}
        if settings is not None:
            kwargs.update(gpu_memory_utilization=settings.gpu_memory_utilization, tensor_parallel_size=settings.tensor_parallel_size)
            if settings.max_model_len is not None:
                kwargs["max_model_len"] = settings.max_model_len
        self.dtype = dtype
        # load_format: vLLM's default "auto" would fall back to pickled *.bin weights.
        self.llm = LLM(model=resolve_model(model), dtype=dtype, seed=seed, trust_remote_code=trust_remote_code, load_format="safetensors", **kwargs)
        self.tokenizer = self.llm.get_tokenizer()

    def describe(self) -> dict:
        import vllm

        described = {"engine": self.name, "model": self.model_name, "dtype": self.dtype, "vllm_version": vllm.__version__}
        if self.settings is not None:
            described["tensor_parallel_size"] = self.settings.tensor_parallel_size
        return described

    def sampling_params(self, sampling: Sampling, seed: int):
        from vllm import SamplingParams

        return SamplingParams(
            temperature=sampling.temperature,
            top_p=1.0 if sampling.greedy else sampling.top_p,
            max_tokens=sampling.max_new_tokens,
            stop=list(sampling.stop),
            include_stop_str_in_output=True,
            ignore_eos=sampling.ignore_eos,
            seed=seed,
        )

    def generate(self, prompts: Sequence[str], sampling: Sampling) -> Iterator[Completion]:
        seeds = sampling.request_seeds(len(prompts))
        for start in range(0, len(prompts), CHUNK):
            chunk = list(prompts[start : start + CHUNK])
            params = [self.sampling_params(sampling, seeds[start + i]) for i in range(len(chunk))]
            outputs = self.llm.generate(chunk, params, use_tqdm=False)
            for offset, output in enumerate(outputs):
                generated = output.outputs[0]
                yield Completion(
                    index=start + offset,
                    text=generated.text,
                    tokens=len(generated.token_ids),
                    prompt_tokens=len(output.prompt_token_ids or []),
                    finish_reason=finish_reason(generated.finish_reason, generated.stop_reason),
                    token_ids=list(generated.token_ids),
                )


def finish_reason(vllm_reason: str | None, stop_reason) -> str:
    """vLLM's ``finish_reason`` / ``stop_reason`` as tomrl's stop / eos / length."""
    if vllm_reason == "length":
        return "length"
    if isinstance(stop_reason, str):
        return "stop"
    return "eos"
