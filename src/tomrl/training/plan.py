"""Will a training config fit its GPUs? Per-GPU memory, host RAM and time per step, before a launch.

    tomrl plan --config configs/train/paper_a_qwen2.5-7b.yaml --accelerate configs/accelerate/deepspeed_zero3_offload.yaml --gpu a100-80gb

    from tomrl.training.plan import plan, format_plan
    result = plan(cfg, accelerate_cfg, gpus=4, gpu_memory_gib=80)     # cfg: TrainConfig; accelerate_cfg: AccelerateConfig | None
    print(format_plan(result)); result.fits; result.suggestion

A plan that does not fit names the smallest change that would, found by planning again with
each change, in this order of preference: a lower ``vllm_gpu_memory_utilization`` whose KV cache
still holds every rollout of the step (free but for memory); a more sharded or offloaded
accelerate config of configs/accelerate (costs communication, and CPU time when offloading); a
lower vLLM share that decodes in waves; ``gradient_checkpointing=true``; a smaller
``micro_batch_size``; a smaller ``eval.batch_size``; more GPUs; then pairs of them, then triples.

Every figure is an ESTIMATE from the model's dimensions and the config, not a measurement. The
accounting (P = the model's parameters, Pt = the trained ones: P, or the LoRA adapter's; N = GPUs):

Memory, per GPU, by when it is held: ``always`` (for the whole run), or only during one phase
(``training`` forward/backward, ``optimizer step``, ``rollouts``, ``validation``); the peak is
``always + the largest phase``.

- Without DeepSpeed (one process, or DDP: a full replica per GPU): master weights float32, 4 B × P;
  compute under bf16 autocast, whose cache holds a bf16 copy of the weights during the forward
  and backward, 2 B × P (training); gradients float32, 4 B × Pt, and under DDP a second copy in
  its reduction buckets (``gradient_as_bucket_view`` is off); AdamW's two float32 moments,
  8 B × Pt; torch AdamW's foreach step allocates a temporary of 4 B × Pt (optimizer step).
  The reference model (when ``kl_coef > 0`` and no LoRA: TRL builds it like the policy, then it
  is float32 too): 4 B × P.
- DeepSpeed with ``mixed_precision: bf16`` (every shipped accelerate config) keeps the module in
  bf16 and the float32 master weights in its optimizer: bf16 weights 2 B × P (÷ N under ZeRO-3), bf16 gradients 2 B × Pt
  (÷ N from ZeRO-2), master + moments 12 B × Pt (÷ N from ZeRO-1; on the host when the optimizer
  is offloaded, with a float32 gradient partition, 4 B × Pt, beside them), the float32
  gradient partition of the GPU step 4 B × Pt ÷ N (optimizer step, not offloaded). The
  reference model: bf16, 2 B × P, sharded only under ZeRO-3 (TRL runs it at stage 0 otherwise).
  ZeRO-2 adds its all-gather bucket (5e8 × 2 B); ZeRO-3 gathers layers as it runs: the largest
  embedding plus two layers in bf16 (training, rollouts). Parameter offload moves the bf16
  weights (policy and reference) to host RAM.
- vLLM (``use_vllm``, ``vllm_mode: colocate``): ``vllm_gpu_memory_utilization`` × the card's
  memory on every GPU, for the whole run; inside it the bf16 weights (2 B × P) and about
  1.5 GiB of vLLM's own buffers, the rest is KV cache. vLLM cannot start unless that rest holds
  one sequence of ``max_prompt_length + max_completion_length`` tokens.
- Activations (training), per process, for b = ``micro_batch_size`` sequences of
  s = ``max_prompt_length + max_completion_length`` tokens, hidden size h, intermediate size I,
  L layers: with gradient checkpointing, each layer's input is kept, L × b·s·h × 4 B (the residual
  stream is float32 when the weights are), plus one layer recomputed in full, b·s·(12·h + 4·I) × 2 B;
  without it, every layer's, L × b·s·(12·h + 4·I) × 2 B. Plus the attention mask, b·s² × 1 B.
  The (12·h + 4·I) values per token are what a Llama/Qwen layer saves for its backward with
  SDPA attention (q, k, v, attention output, norms, and the MLP's gate, up, SiLU and product).
  TRL's fused LM head never makes the (b, s, vocab) logits, so they are not counted.
- Rollouts without vLLM: ``model.generate`` holds a KV cache of all R = completions per step ÷ N
  sequences at once, R × s × 2·L·kv_heads·head_dim × 2 B; tomrl's slot decoder holds
  min(R, 64) slots of it in the weights' dtype, and copies the fused q/k/v and gate/up weights
  (kept until the next step). Under ZeRO-3 the full bf16 model is gathered, 2 B × P.
- Validation (``eval.every_steps > 0``): the slot decoder (Llama, Qwen2, Qwen3 without LoRA)
  decodes a bf16 copy of the weights when the weights are float32 (2 B × P; under ZeRO-3 the
  gathered model, 2 B × P), plus its fused q/k/v and gate/up copies; its KV cache is
  2 × L × kv_heads × head_dim × (``max_prompt_length`` + ``eval.max_new_tokens``) positions ×
  ``eval.batch_size`` slots × 2 B. Other models use ``model.generate`` (same cache, in the
  weights' dtype).
- Always: CUDA context, cuBLAS/NCCL workspaces, 1 GiB (1.5 GiB with several processes).

A plan fits when the peak is at most 95 % of the card (the rest for allocator fragmentation).
Prompts are taken at ``max_prompt_length`` and completions at their limit: an upper bound.

Host RAM (the node): offloaded states as above, 4 GiB per process (Python, torch, CUDA host
buffers, vLLM); while loading, a float32 copy of the policy (and reference) per process unless
ZeRO-3 builds them sharded (``zero3_init_flag``); while saving best/ or final/, the main process's
copy of the weights (float32, 4 B × P; under ZeRO-3 the gathered bf16 weights, 2 B × P).

Time per step (ESTIMATE; completions at their token limit, so an upper bound): training
FLOPs ≈ 6·P·tokens (2·P·tokens forward + 4·P·tokens backward, 2·P with LoRA; + 2·P·tokens when
checkpointing recomputes the forward), × ``num_iterations``, + 2·P·tokens for the reference
forward and for the old-policy forward TRL makes for vLLM's importance sampling or
``num_iterations > 1``, at 30 % of the card's
bf16 peak (half that peak for float32/TF32). Generation: prefill 2·P·prompt tokens at 50 % of
peak; decode is memory-bound: every step reads the weights and the live KV cache at 60 % (vLLM)
or 50 % (generate, slot decoder) of the card's bandwidth, plus a fixed cost per step (vLLM 2 ms
with CUDA graphs; 0.5 ms per layer of kernel launches for ``model.generate``). DDP all-reduces
the gradients once per step; ZeRO-2/3 reduce-scatter them every micro-batch and ZeRO-3 gathers
the weights three times per micro-batch (forward, recompute, backward), at 100 GB/s between GPUs;
an offloaded optimizer steps on the CPU at 1e9 parameters/s per process after 4 B × Pt ÷ N cross
PCIe at 20 GB/s. Validation time is not included. Attention FLOPs (10-20 % more at 3k tokens
for the small models) are not counted.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from tomrl.config import ConfigError

if TYPE_CHECKING:  # run-time imports stay inside functions: `tomrl plan --help` loads no pydantic or torch
    from tomrl.training.accelerate_config import AccelerateConfig
    from tomrl.training.config import TrainConfig

GIB = 1024**3
ACCELERATE_DIR = Path(__file__).resolve().parents[3] / "configs" / "accelerate"

# Phases of a step; memory held in one is freed before the next.
ALWAYS, TRAINING, OPTIMIZER_STEP, ROLLOUTS, VALIDATION = "always", "training", "optimizer step", "rollouts", "validation"
PHASES = (TRAINING, OPTIMIZER_STEP, ROLLOUTS, VALIDATION)
LOADING, SAVING = "while loading the models", "while saving"  # host RAM held only then

USABLE_FRACTION = 0.95  # of the card: the rest for allocator fragmentation
CUDA_CONTEXT_GIB = 1.0  # context, cuBLAS workspace, libraries
NCCL_EXTRA_GIB = 0.5  # NCCL buffers with several processes
VLLM_OWN_GIB = 1.5  # vLLM's activations profile (4,096 batched tokens), CUDA graphs, sampler
PROCESS_HOST_GIB = 4.0  # host RAM per process: Python, torch, CUDA host buffers, vLLM
ZERO2_ALLGATHER_BUCKET = 5e8  # DeepSpeed's default allgather_bucket_size (elements)
SLOT_ROLLOUT_SLOTS = 64  # tomrl.training.rollouts.MAX_SLOTS (not imported: that module imports torch)
SLOT_ARCHITECTURES = ("llama", "qwen2", "qwen3")  # tomrl.generation.slots.SLOT_ARCHITECTURES

# Time model (see the module docstring).
TRAIN_MFU = 0.30
PREFILL_MFU = 0.50
VLLM_BANDWIDTH_EFFICIENCY = 0.60
HF_BANDWIDTH_EFFICIENCY = 0.50
VLLM_STEP_OVERHEAD_S = 0.002
HF_STEP_OVERHEAD_PER_LAYER_S = 0.0005
INTERCONNECT_BYTES_PER_S = 100e9
PCIE_BYTES_PER_S = 20e9
CPU_ADAM_PARAMS_PER_S = 1e9


# ----------------------------------------------------------------------------- cards


@dataclass(frozen=True)
class GpuCard:
    name: str
    memory_gib: float  # as nvidia-smi reports it
    bf16_tflops: float  # dense tensor-core peak
    bandwidth_tb_s: float  # memory bandwidth


GPU_CARDS: dict[str, GpuCard] = {
    "a100-40gb": GpuCard("A100-40GB", 40.0, 312, 1.555),
    "a100-80gb": GpuCard("A100-80GB", 80.0, 312, 2.039),
    "h100-80gb": GpuCard("H100-80GB", 79.6, 989, 3.35),
    "h200": GpuCard("H200", 140.4, 989, 4.8),
    "l40s": GpuCard("L40S", 45.0, 362, 0.864),
    "rtx4090": GpuCard("RTX-4090", 24.0, 165, 1.008),
}
DEFAULT_CARD = "a100-80gb"  # Paper A's cards


def gpu_card(name: str | None = None, memory_gib: float | None = None) -> GpuCard:
    """The card named ``name`` (GPU_CARDS), its memory replaced by ``memory_gib`` when given.

    With a memory and no name, the card is an unnamed one computing and moving data like an A100-80GB.
    """
    if name is not None and name not in GPU_CARDS:
        raise ConfigError(f"unknown GPU '{name}'; known: {', '.join(GPU_CARDS)} (or give --gpu-memory GIB)")
    card = GPU_CARDS[name or DEFAULT_CARD]
    if memory_gib is not None:
        if memory_gib <= 0:
            raise ConfigError(f"--gpu-memory must be > 0 GiB, got {memory_gib}")
        label = card.name if name is not None else f"{memory_gib:g}-GiB GPU (speed of an {card.name})"
        card = replace(card, name=label, memory_gib=float(memory_gib))
    return card


# ----------------------------------------------------------------------------- model dimensions


@dataclass(frozen=True)
class ModelDims:
    """What the memory and FLOP counts need of a dense decoder (Llama/Qwen layout)."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied_embeddings: bool
    model_type: str
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False  # Qwen3
    source: str = "built-in table"

    @property
    def layer_parameters(self) -> int:
        h, q, kv = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim
        attention = h * q + 2 * h * kv + q * h + (q + 2 * kv if self.qkv_bias else 0) + (h if self.o_bias else 0)
        mlp = 3 * h * self.intermediate + (2 * self.intermediate + h if self.mlp_bias else 0)
        norms = 2 * h + (2 * self.head_dim if self.qk_norm else 0)
        return attention + mlp + norms

    @property
    def embedding_parameters(self) -> int:
        return self.vocab * self.hidden

    @property
    def parameters(self) -> int:
        head = 0 if self.tied_embeddings else self.embedding_parameters
        return self.embedding_parameters + head + self.layers * self.layer_parameters + self.hidden

    @property
    def fused_copy_parameters(self) -> int:
        """The q/k/v and gate/up weights the slot decoder copies into fused matrices."""
        qkv = self.hidden * (self.heads + 2 * self.kv_heads) * self.head_dim
        return self.layers * (qkv + 2 * self.hidden * self.intermediate)

    def kv_bytes_per_token(self, value_bytes: int) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * value_bytes


def _qwen25(hidden: int, layers: int, heads: int, kv_heads: int, intermediate: int, vocab: int, tied: bool) -> ModelDims:
    return ModelDims(hidden, layers, heads, kv_heads, hidden // heads, intermediate, vocab, tied, "qwen2", qkv_bias=True)


# From the models' config.json files (Hugging Face hub); the parameter counts (0.5B: 494,032,768) are
# checked in tests/training/test_plan.py against transformers' own model built from these numbers.
_QWEN25_05B = _qwen25(896, 24, 14, 2, 4864, 151936, True)
_QWEN25_15B = _qwen25(1536, 28, 12, 2, 8960, 151936, True)
_QWEN25_3B = _qwen25(2048, 36, 16, 2, 11008, 151936, True)
_QWEN25_7B = _qwen25(3584, 28, 28, 4, 18944, 152064, False)
_SMOLLM2_135M = ModelDims(576, 30, 9, 3, 64, 1536, 49152, True, "llama")
BUILTIN_MODELS: dict[str, ModelDims] = {
    "qwen/qwen2.5-0.5b-instruct": _QWEN25_05B,
    "qwen/qwen2.5-0.5b": _QWEN25_05B,
    "qwen/qwen2.5-1.5b-instruct": _QWEN25_15B,
    "qwen/qwen2.5-1.5b": _QWEN25_15B,
    "qwen/qwen2.5-3b-instruct": _QWEN25_3B,
    "qwen/qwen2.5-3b": _QWEN25_3B,
    "qwen/qwen2.5-7b-instruct": _QWEN25_7B,
    "qwen/qwen2.5-7b": _QWEN25_7B,
    "huggingfacetb/smollm2-135m-instruct": _SMOLLM2_135M,
    "huggingfacetb/smollm2-135m": _SMOLLM2_135M,
}


def dims_from_config(config: dict, source: str) -> ModelDims:
    """ModelDims of a transformers ``config.json`` (dense Llama-style decoders)."""
    if any(key in config for key in ("num_experts", "num_local_experts", "n_routed_experts")):
        raise ConfigError(f"{source}: a mixture-of-experts model; tomrl plan counts dense decoders only")
    missing = [k for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size") if k not in config]
    if missing:
        raise ConfigError(f"{source}: no {', '.join(missing)}; tomrl plan reads Llama/Qwen-style config.json files")
    model_type = str(config.get("model_type", "unknown"))
    heads = int(config["num_attention_heads"])
    hidden = int(config["hidden_size"])
    attention_bias = bool(config.get("attention_bias", False))
    return ModelDims(
        hidden=hidden,
        layers=int(config["num_hidden_layers"]),
        heads=heads,
        kv_heads=int(config.get("num_key_value_heads") or heads),
        head_dim=int(config.get("head_dim") or hidden // heads),
        intermediate=int(config["intermediate_size"]),
        vocab=int(config["vocab_size"]),
        tied_embeddings=bool(config.get("tie_word_embeddings", True)),
        model_type=model_type,
        qkv_bias=model_type == "qwen2" or attention_bias,
        o_bias=attention_bias,
        mlp_bias=bool(config.get("mlp_bias", False)),
        qk_norm=model_type == "qwen3",
        source=source,
    )


def model_dimensions(model: str) -> ModelDims:
    """The dimensions of ``model`` (a TrainConfig.model), without downloading anything.

    From, in order: the embedded model's prepared folder, a local folder's config.json, the
    Hugging Face cache, the built-in table (BUILTIN_MODELS).
    """
    from tomrl.models import EMBEDDED_MODELS, TINY_MODEL, embedded_dir, is_prepared, tiny_model_dir

    candidates: list[Path] = []
    table_key = model.lower()
    if model in EMBEDDED_MODELS:
        if is_prepared(model):
            candidates.append(embedded_dir(model) / "config.json")
        table_key = EMBEDDED_MODELS[model].hub_id.lower()
    elif model == TINY_MODEL:
        candidates.append(tiny_model_dir() / "config.json")  # built in seconds on first use, as tomrl train does
    else:
        candidates.append(Path(model).expanduser() / "config.json")
        cached = _hf_cached_config(model)
        if cached is not None:
            candidates.append(cached)
    for path in candidates:
        if path.is_file():
            try:
                config = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as err:
                raise ConfigError(f"{path}: cannot read the model's config ({err})") from None
            return dims_from_config(config, str(path))
    if table_key in BUILTIN_MODELS:
        return BUILTIN_MODELS[table_key]
    raise ConfigError(
        f"model '{model}': no config.json in a local folder or the Hugging Face cache, and not in tomrl plan's table "
        f"({', '.join(sorted(BUILTIN_MODELS))}); fetch it with: huggingface-cli download {model} config.json"
    )


def _hf_cached_config(model: str) -> Path | None:
    if "/" not in model or Path(model).expanduser().exists():
        return None
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(model, "config.json")
    except Exception:  # an id the hub library rejects is simply not cached
        return None
    return Path(found) if isinstance(found, str) else None


def lora_parameters(dims: ModelDims, rank: int, target_modules: Sequence[str]) -> int:
    """Parameters of a LoRA adapter of ``rank`` on ``target_modules`` (['all-linear'] = every layer's linear maps)."""
    h, q, kv, inter = dims.hidden, dims.heads * dims.head_dim, dims.kv_heads * dims.head_dim, dims.intermediate
    shapes = {
        "q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h),
        "gate_proj": (h, inter), "up_proj": (h, inter), "down_proj": (inter, h),
    }
    names = list(shapes) if list(target_modules) == ["all-linear"] else [n for n in target_modules if n in shapes]
    return dims.layers * sum(rank * (shapes[n][0] + shapes[n][1]) for n in names)


# ----------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class MemoryRow:
    label: str
    gib: float
    phase: str  # ALWAYS or one of PHASES
    formula: str


@dataclass(frozen=True)
class TimeRow:
    label: str
    seconds: float
    formula: str


@dataclass(frozen=True)
class Suggestion:
    change: str  # "use configs/accelerate/deepspeed_zero3_offload.yaml", "vllm_gpu_memory_utilization=0.35", ...
    overrides: tuple[str, ...]  # key=value overrides of the train config it needs
    accelerate_file: str | None
    gpus: int
    plan: "Plan"  # the re-planned result (it fits)


@dataclass(frozen=True)
class Plan:
    model: str
    dims: ModelDims
    card: GpuCard
    gpus: int
    strategy: str
    accelerate_file: str | None
    precision: str
    rows: tuple[MemoryRow, ...]
    host_rows: tuple[MemoryRow, ...]  # phase ALWAYS (steady), LOADING or SAVING
    time_rows: tuple[TimeRow, ...]
    notes: tuple[str, ...]
    problems: tuple[str, ...]  # reasons it cannot run besides the peak (vLLM cannot start)
    suggestion: Suggestion | None = None
    searched: bool = False  # whether a smaller change was looked for

    @property
    def parameters(self) -> int:
        return self.dims.parameters

    @property
    def always_gib(self) -> float:
        return sum(r.gib for r in self.rows if r.phase == ALWAYS)

    @property
    def phase_gib(self) -> dict[str, float]:
        return {phase: sum(r.gib for r in self.rows if r.phase == phase) for phase in PHASES}

    @property
    def peak_gib(self) -> float:
        return self.always_gib + max(self.phase_gib.values())

    @property
    def usable_gib(self) -> float:
        return USABLE_FRACTION * self.card.memory_gib

    @property
    def fits(self) -> bool:
        return self.peak_gib <= self.usable_gib and not self.problems

    @property
    def host_steady_gib(self) -> float:
        return sum(r.gib for r in self.host_rows if r.phase == ALWAYS)

    @property
    def host_peak_gib(self) -> float:
        return self.host_steady_gib + max([sum(r.gib for r in self.host_rows if r.phase == phase) for phase in (LOADING, SAVING)])

    @property
    def step_seconds(self) -> float:
        return sum(r.seconds for r in self.time_rows)


def plan(
    cfg: "TrainConfig",
    accelerate_cfg: "AccelerateConfig | None" = None,
    gpus: int | None = None,
    gpu_memory_gib: float | None = None,
    *,
    card: GpuCard | None = None,
    accelerate_file: str | None = None,
    dims: ModelDims | None = None,
    alternatives: Sequence[tuple[str, "AccelerateConfig"]] | None = None,
    suggest: bool = True,
) -> Plan:
    """Plan ``cfg`` on ``gpus`` GPUs of ``gpu_memory_gib`` GiB (or ``card``) under ``accelerate_cfg``.

    ``gpus`` defaults to the accelerate config's ``num_processes`` (1 without one). When it does
    not fit and ``suggest``, ``Plan.suggestion`` holds the smallest change that fits (re-planned),
    drawn from ``alternatives`` (default: the shipped configs/accelerate files) and the config's keys.
    """
    if card is None:
        card = gpu_card(None, gpu_memory_gib)
    elif gpu_memory_gib is not None:
        card = replace(card, memory_gib=float(gpu_memory_gib))
    gpus = gpus if gpus is not None else (accelerate_cfg.num_processes if accelerate_cfg is not None else 1)
    _check_launch(cfg, accelerate_cfg, gpus)
    dims = dims if dims is not None else model_dimensions(cfg.model)
    result = _plan(cfg, accelerate_cfg, gpus, card, dims, accelerate_file)
    if result.fits or not suggest:
        return result
    if alternatives is None:
        alternatives = shipped_accelerate_configs()
    return replace(result, suggestion=_smallest_change(cfg, accelerate_cfg, gpus, card, dims, accelerate_file, alternatives), searched=True)


def _check_launch(cfg: "TrainConfig", accelerate_cfg: "AccelerateConfig | None", gpus: int) -> None:
    if gpus < 1:
        raise ConfigError(f"--gpus must be >= 1, got {gpus}")
    kind = accelerate_cfg.distributed_type if accelerate_cfg is not None else "NO"
    if kind == "FSDP":
        raise ConfigError("tomrl plan knows DDP (MULTI_GPU) and DeepSpeed accelerate configs, not FSDP")
    if gpus > 1 and kind == "NO":
        raise ConfigError(f"{gpus} GPUs need an accelerate config: --accelerate configs/accelerate/multi_gpu.yaml (DDP) or a deepspeed_*.yaml")
    if cfg.completions_per_step % (cfg.micro_batch_size * gpus) != 0:
        raise ConfigError(
            f"prompts_per_step x rollouts_per_prompt = {cfg.completions_per_step} completions must split into micro-batches of "
            f"{cfg.micro_batch_size} on each of {gpus} GPUs"
        )


def shipped_accelerate_configs() -> list[tuple[str, "AccelerateConfig"]]:
    """``(path relative to the repository, config)`` of every configs/accelerate/*.yaml shipped."""
    from tomrl.config import load_config
    from tomrl.training.accelerate_config import AccelerateConfig

    if not ACCELERATE_DIR.is_dir():
        return []
    root = ACCELERATE_DIR.parents[1]
    return [(str(p.relative_to(root)), load_config(AccelerateConfig, p)) for p in sorted(ACCELERATE_DIR.glob("*.yaml"))]


@dataclass(frozen=True)
class _Layout:
    """How the training state is laid out over the GPUs."""

    deepspeed: bool
    stage: int
    offload_optimizer: str  # "none", "cpu", "nvme"
    offload_params: str
    zero3_init: bool
    gpus: int

    @staticmethod
    def of(accelerate_cfg: "AccelerateConfig | None", gpus: int) -> "_Layout":
        ds = accelerate_cfg.deepspeed_config if accelerate_cfg is not None else None
        if ds is None:
            return _Layout(False, 0, "none", "none", False, gpus)
        params = ds.offload_param_device if ds.zero_stage == 3 else "none"
        return _Layout(True, ds.zero_stage, ds.offload_optimizer_device, params, ds.zero3_init_flag and ds.zero_stage == 3, gpus)

    def describe(self) -> str:
        if not self.deepspeed:
            return "one process" if self.gpus == 1 else f"DDP over {self.gpus} GPUs (a full replica on each)"
        text = f"DeepSpeed ZeRO-{self.stage} over {self.gpus} GPU{'s' if self.gpus > 1 else ''}"
        if self.offload_optimizer != "none":
            text += f", optimizer states offloaded to {self.offload_optimizer}"
        if self.offload_params != "none":
            text += f", parameters offloaded to {self.offload_params}"
        return text

    @property
    def sharding_rank(self) -> int:
        """How much memory the layout saves, for ordering suggestions (larger: more sharding/offload)."""
        if not self.deepspeed:
            return 0
        return 1 + self.stage + (2 if self.offload_optimizer != "none" else 0) + (2 if self.offload_params != "none" else 0)


def _plan(cfg: "TrainConfig", accelerate_cfg: "AccelerateConfig | None", gpus: int, card: GpuCard, dims: ModelDims, accelerate_file: str | None) -> Plan:
    layout = _Layout.of(accelerate_cfg, gpus)
    precision = "bfloat16" if cfg.precision == "auto" else cfg.precision  # auto: bf16 on every card of the table
    compute_bytes = 4 if precision == "float32" else 2
    n = gpus
    p = dims.parameters
    lora = cfg.lora.enabled
    trained = lora_parameters(dims, cfg.lora.rank, cfg.lora.target_modules) if lora else p
    reference = cfg.kl_coef > 0 and not lora
    prompt, completion = cfg.max_prompt_length, cfg.max_completion_length
    seq = prompt + completion
    per_gpu = cfg.completions_per_step // n
    b = cfg.micro_batch_size
    rows: list[MemoryRow] = []
    host: list[MemoryRow] = []
    notes: list[str] = []
    problems: list[str] = []

    def add(label: str, nbytes: float, phase: str, formula: str) -> None:
        if nbytes > 0:
            rows.append(MemoryRow(label, nbytes / GIB, phase, formula))

    def add_host(label: str, nbytes: float, phase: str, formula: str) -> None:
        if nbytes > 0:
            host.append(MemoryRow(label, nbytes / GIB, phase, formula))

    mp, mt = _millions(p), _millions(trained)
    if layout.deepspeed and compute_bytes == 4:
        notes.append("precision float32 under DeepSpeed is counted as DeepSpeed's bf16 (the shipped accelerate configs set mixed_precision bf16)")
    # 1. Weights, gradients, optimizer states.
    if not layout.deepspeed:
        # Master weights are float32 whatever the compute dtype (bf16 autocast computes from them).
        add("policy weights, float32 master" + (" (frozen base + adapter)" if lora else ""), 4 * p + (4 * trained if lora else 0), ALWAYS,
            f"4 B x {mp}" + (f" + 4 B x {mt} adapter" if lora else ""))
        add("gradients, float32", 4 * trained, ALWAYS, f"4 B x {mt}")
        if n > 1:
            add("DDP reduction buckets (a second copy of the gradients)", 4 * trained, ALWAYS, f"4 B x {mt}")
        add("AdamW moments, float32", 8 * trained, ALWAYS, f"8 B x {mt}")
        if compute_bytes == 2:
            add(f"{precision} autocast copy of the weights", 2 * p, TRAINING, f"2 B x {mp}")
        add("AdamW step temporary (torch foreach)", 4 * trained, OPTIMIZER_STEP, f"4 B x {mt}")
    else:
        shard_w = n if layout.stage == 3 else 1
        weights = 2 * p / shard_w
        if layout.offload_params != "none":
            add_host(f"policy bf16 weights (offloaded to {layout.offload_params})", 2 * p, ALWAYS, f"2 B x {mp}")
        else:
            add("policy weights, bf16" + (f" (÷ {n}, ZeRO-3)" if shard_w > 1 else ""), weights, ALWAYS, f"2 B x {mp}" + (f" / {n}" if shard_w > 1 else ""))
        shard_g = n if layout.stage >= 2 else 1
        add("gradients, bf16" + (f" (÷ {n}, ZeRO-{layout.stage})" if shard_g > 1 else ""), 2 * trained / shard_g, ALWAYS,
            f"2 B x {mt}" + (f" / {n}" if shard_g > 1 else ""))
        shard_o = n if layout.stage >= 1 else 1
        if layout.offload_optimizer != "none":
            add_host(f"float32 master weights + AdamW moments + gradient partition (offloaded to {layout.offload_optimizer})", 16 * trained, ALWAYS,
                     f"(4 + 8 + 4) B x {mt}")
        else:
            add("float32 master weights + AdamW moments" + (f" (÷ {n})" if shard_o > 1 else ""), 12 * trained / shard_o, ALWAYS,
                f"12 B x {mt}" + (f" / {n}" if shard_o > 1 else ""))
            add("float32 gradient partition of the step", 4 * trained / shard_o, OPTIMIZER_STEP, f"4 B x {mt}" + (f" / {n}" if shard_o > 1 else ""))
        if layout.stage == 2:
            add("ZeRO-2 all-gather bucket", ZERO2_ALLGATHER_BUCKET * 2, TRAINING, "5e8 x 2 B")
        if layout.stage == 3:
            working = 2 * (dims.embedding_parameters + 2 * dims.layer_parameters)
            add("ZeRO-3 gathered layers (embedding + 2 layers, bf16)", working, TRAINING, "2 B x (vocab x hidden + 2 x layer)")
    # 2. The reference model.
    if reference:
        if not layout.deepspeed:
            add(f"reference model, float32 (kl_coef {cfg.kl_coef:g})", 4 * p, ALWAYS, f"4 B x {mp}")
        elif layout.offload_params != "none":
            add_host(f"reference bf16 weights (offloaded to {layout.offload_params})", 2 * p, ALWAYS, f"2 B x {mp}")
        else:
            shard = n if layout.stage == 3 else 1
            add(f"reference model, bf16 (kl_coef {cfg.kl_coef:g})" + (f" (÷ {n})" if shard > 1 else ""), 2 * p / shard, ALWAYS,
                f"2 B x {mp}" + (f" / {n}" if shard > 1 else ""))
    elif cfg.kl_coef > 0 and lora:
        notes.append("LoRA: the reference policy is the base model with the adapter disabled (no second copy)")
    # 3. vLLM.
    vllm_sequences = 0
    if cfg.use_vllm and cfg.vllm_mode == "colocate":
        share = cfg.vllm_gpu_memory_utilization * card.memory_gib * GIB
        room = share - 2 * p - VLLM_OWN_GIB * GIB
        per_sequence = dims.kv_bytes_per_token(2) * seq
        vllm_sequences = max(0, int(room // per_sequence))
        add("vLLM, colocated", share, ALWAYS,
            f"vllm_gpu_memory_utilization {cfg.vllm_gpu_memory_utilization:g} x {card.memory_gib:g} GiB: bf16 weights {2 * p / GIB:.1f}, "
            f"buffers {VLLM_OWN_GIB:g}, KV cache for {vllm_sequences} sequences of {seq} tokens ({per_gpu} rollouts per GPU)")
        if vllm_sequences < 1:
            need = (2 * p + VLLM_OWN_GIB * GIB + per_sequence) / (card.memory_gib * GIB)
            problems.append(
                f"vLLM cannot start: {cfg.vllm_gpu_memory_utilization:g} x {card.memory_gib:g} GiB holds its weights ({2 * p / GIB:.1f} GiB) "
                f"and buffers but not one {seq}-token sequence; it needs vllm_gpu_memory_utilization >= {math.ceil(need * 100) / 100:.2f}"
            )
        elif vllm_sequences < per_gpu:
            notes.append(f"vLLM's KV cache holds {vllm_sequences} of the {per_gpu} rollouts per GPU at full length: it decodes them in waves")
    elif cfg.use_vllm:
        notes.append("vllm_mode=server: vLLM runs on other GPUs (trl vllm-serve), not counted here")
    add("CUDA context, cuBLAS and NCCL workspaces", (CUDA_CONTEXT_GIB + (NCCL_EXTRA_GIB if n > 1 else 0)) * GIB, ALWAYS, "fixed")
    # 4. Activations.
    residual_bytes = 4 if not layout.deepspeed else compute_bytes  # float32 weights keep a float32 residual stream
    per_layer_values = 12 * dims.hidden + 4 * dims.intermediate
    mask = b * seq * seq
    if cfg.gradient_checkpointing:
        act = dims.layers * b * seq * dims.hidden * residual_bytes + b * seq * per_layer_values * compute_bytes + mask
        formula = (f"{dims.layers} layers x {b} x {seq} x {dims.hidden} x {residual_bytes} B + {b} x {seq} x (12 x {dims.hidden} + "
                   f"4 x {dims.intermediate}) x {compute_bytes} B + mask {b} x {seq}^2 B")
        label = "activations (gradient checkpointing)"
    else:
        act = dims.layers * b * seq * per_layer_values * compute_bytes + mask
        formula = f"{dims.layers} layers x {b} x {seq} x (12 x {dims.hidden} + 4 x {dims.intermediate}) x {compute_bytes} B + mask {b} x {seq}^2 B"
        label = "activations (no gradient checkpointing)"
    add(label, act, TRAINING, formula)
    # 5. Rollouts without vLLM.
    weight_dtype_bytes = 2 if layout.deepspeed else 4  # the slot decoder computes in the weights' dtype: float32 masters unless DeepSpeed
    engine = "vllm" if cfg.use_vllm else _rollout_engine(cfg, dims)
    if engine != "vllm":
        gathered = layout.deepspeed and layout.stage == 3
        if gathered:
            add("ZeRO-3 full model gathered for generation", 2 * p, ROLLOUTS, f"2 B x {mp}")
        if engine == "slots":
            slots = min(per_gpu, SLOT_ROLLOUT_SLOTS)
            kv_bytes = weight_dtype_bytes
            add("rollout KV cache (slot decoder)", slots * seq * dims.kv_bytes_per_token(kv_bytes), ROLLOUTS,
                f"2 x {dims.layers} x {dims.kv_heads} x {dims.head_dim} x {seq} positions x {slots} slots x {kv_bytes} B")
            add("slot decoder's fused q/k/v and gate/up copies", weight_dtype_bytes * dims.fused_copy_parameters, ROLLOUTS if gathered else ALWAYS,
                f"{weight_dtype_bytes} B x {_millions(dims.fused_copy_parameters)}")
        else:
            add("rollout KV cache (model.generate, all at once)", per_gpu * seq * dims.kv_bytes_per_token(compute_bytes), ROLLOUTS,
                f"2 x {dims.layers} x {dims.kv_heads} x {dims.head_dim} x {seq} positions x {per_gpu} sequences x {compute_bytes} B")
    # 6. Validation.
    if cfg.eval.every_steps > 0:
        positions = prompt + cfg.eval.max_new_tokens
        slots = cfg.eval.batch_size
        slot_path = dims.model_type in SLOT_ARCHITECTURES and not lora
        if layout.deepspeed and layout.stage == 3:
            add("validation: ZeRO-3 full model gathered", 2 * p, VALIDATION, f"2 B x {mp}")
            decode_bytes = 2
        elif not layout.deepspeed and slot_path and compute_bytes == 2:
            add(f"validation: {precision} copy of the weights to decode with", 2 * p, VALIDATION, f"2 B x {mp}")
            decode_bytes = 2
        else:
            decode_bytes = 2 if layout.deepspeed else 4
        if slot_path:
            add("validation: fused q/k/v and gate/up copies", decode_bytes * dims.fused_copy_parameters, VALIDATION,
                f"{decode_bytes} B x {_millions(dims.fused_copy_parameters)}")
        add("validation KV cache" + ("" if slot_path else " (model.generate)"), slots * positions * dims.kv_bytes_per_token(decode_bytes), VALIDATION,
            f"2 x {dims.layers} layers x {dims.kv_heads} kv heads x {dims.head_dim} x {positions} positions x {slots} slots x {decode_bytes} B")
    # 7. Host RAM.
    add_host("processes (Python, torch, CUDA host buffers, vLLM)", n * PROCESS_HOST_GIB * GIB, ALWAYS, f"{n} x {PROCESS_HOST_GIB:g} GiB")
    if not layout.zero3_init:
        copies = 2 if reference else 1
        add_host("float32 policy" + (" and reference" if reference else "") + " per process", n * copies * 4 * p, LOADING,
                 f"{n} x {copies} x 4 B x {mp}")
    if layout.deepspeed and layout.stage == 3:
        add_host("the main process gathers the bf16 weights to write best/, final/", 2 * p, SAVING, f"2 B x {mp}")
    else:
        add_host("the main process serializes the float32 weights for best/, final/", 4 * p if not layout.deepspeed else 2 * p, SAVING,
                 f"{4 if not layout.deepspeed else 2} B x {mp}")
    time_rows = _step_time(cfg, layout, card, dims, trained, engine, vllm_sequences, precision)
    return Plan(
        model=cfg.model,
        dims=dims,
        card=card,
        gpus=gpus,
        strategy=layout.describe(),
        accelerate_file=accelerate_file,
        precision=precision,
        rows=tuple(rows),
        host_rows=tuple(host),
        time_rows=tuple(time_rows),
        notes=tuple(notes),
        problems=tuple(problems),
    )


def _rollout_engine(cfg: "TrainConfig", dims: ModelDims) -> str:
    """``slots`` or ``transformers``, as TrainConfig.rollout_engine resolves without vLLM (tomrl.training.rollouts)."""
    if cfg.rollout_engine != "auto":
        return cfg.rollout_engine
    return "slots" if dims.model_type in SLOT_ARCHITECTURES and not cfg.lora.enabled else "transformers"


def _step_time(cfg, layout: _Layout, card: GpuCard, dims: ModelDims, trained: int, engine: str, vllm_sequences: int, precision: str) -> list[TimeRow]:
    n = layout.gpus
    p = dims.parameters
    peak = card.bf16_tflops * 1e12 * (0.5 if precision == "float32" else 1.0)
    per_gpu = cfg.completions_per_step // n
    prompt, completion = cfg.max_prompt_length, cfg.max_completion_length
    rows: list[TimeRow] = []
    # Rollouts: prefill at PREFILL_MFU, then decode steps bound by memory traffic plus a fixed cost.
    if engine == "vllm":
        together = max(1, min(per_gpu, vllm_sequences)) if vllm_sequences else per_gpu
        weight_bytes, efficiency, overhead, kv_value = 2 * p, VLLM_BANDWIDTH_EFFICIENCY, VLLM_STEP_OVERHEAD_S, 2
        name = "vLLM"
    else:
        together = min(per_gpu, SLOT_ROLLOUT_SLOTS) if engine == "slots" else per_gpu
        weight_bytes = (2 if layout.deepspeed else 4) * p
        efficiency, overhead = HF_BANDWIDTH_EFFICIENCY, HF_STEP_OVERHEAD_PER_LAYER_S * dims.layers
        kv_value = 2 if layout.deepspeed else 4 if engine == "slots" else 2
        name = "slot decoder" if engine == "slots" else "model.generate"
    waves = math.ceil(per_gpu / together)
    prefill = 2 * p * per_gpu * prompt / (peak * PREFILL_MFU)
    mean_cache = prompt + completion / 2
    step_bytes = weight_bytes + together * mean_cache * dims.kv_bytes_per_token(kv_value)
    per_step = step_bytes / (card.bandwidth_tb_s * 1e12 * efficiency) + overhead
    decode = waves * completion * per_step
    rows.append(TimeRow(
        f"rollouts ({name}): {per_gpu} per GPU, {together} at a time",
        prefill + decode,
        f"prefill 2·P·{per_gpu}·{prompt} at {PREFILL_MFU:.0%} of {peak / 1e12:.0f} TFLOP/s + {waves} x {completion} decode steps x "
        f"{per_step * 1e3:.1f} ms ({step_bytes / 1e9:.1f} GB read at {efficiency:.0%} of {card.bandwidth_tb_s} TB/s + {overhead * 1e3:.1f} ms)",
    ))
    # Training.
    tokens = per_gpu * (prompt + completion)
    backward = 4 if not cfg.lora.enabled else 2  # LoRA: no weight gradients of the frozen base (activation gradients only)
    policy = (2 + backward + (2 if cfg.gradient_checkpointing else 0)) * p * tokens * cfg.num_iterations
    old_policy = 2 * p * tokens if (cfg.num_iterations > 1 or (cfg.use_vllm and cfg.vllm_importance_sampling_correction)) else 0
    ref = 2 * p * tokens if cfg.kl_coef > 0 else 0  # the reference forward (with LoRA: the base, adapter disabled)
    factor = (2 + backward + (2 if cfg.gradient_checkpointing else 0))
    extra = " + 2·P·tokens (old policy)" if old_policy else ""
    extra += " + 2·P·tokens (reference)" if ref else ""
    rows.append(TimeRow(
        f"forward/backward: {tokens:,} tokens per GPU",
        (policy + old_policy + ref) / (peak * TRAIN_MFU),
        f"{factor}·P·tokens{' x ' + str(cfg.num_iterations) if cfg.num_iterations > 1 else ''}{extra} at {TRAIN_MFU:.0%} of {peak / 1e12:.0f} TFLOP/s",
    ))
    # Communication and the optimizer.
    micro_batches = per_gpu // cfg.micro_batch_size * cfg.num_iterations
    spread = (n - 1) / n
    if n > 1:
        if not layout.deepspeed:
            comm = 2 * 4 * trained * spread / INTERCONNECT_BYTES_PER_S
            formula = f"all-reduce 2 x 4 B x Pt x {spread:.2f} at {INTERCONNECT_BYTES_PER_S / 1e9:.0f} GB/s"
        else:
            gathers = 3 if layout.stage == 3 else 0
            comm = micro_batches * (gathers * 2 * dims.parameters + 2 * trained) * spread / INTERCONNECT_BYTES_PER_S
            formula = (f"{micro_batches} micro-batches x ({gathers} gathers x 2 B x P + a reduce-scatter of 2 B x Pt) x {spread:.2f} "
                       f"at {INTERCONNECT_BYTES_PER_S / 1e9:.0f} GB/s")
        rows.append(TimeRow("communication between GPUs", comm, formula))
    if layout.deepspeed and layout.offload_optimizer != "none":
        shard = trained / n
        rows.append(TimeRow(
            "optimizer step on the CPU",
            shard / CPU_ADAM_PARAMS_PER_S + 4 * shard / PCIE_BYTES_PER_S,
            f"Pt/{n} at {CPU_ADAM_PARAMS_PER_S:.0e} params/s + 4 B x Pt/{n} at {PCIE_BYTES_PER_S / 1e9:.0f} GB/s",
        ))
    return rows


def _millions(count: float) -> str:
    return f"{count / 1e9:.2f} B" if count >= 1e9 else f"{count / 1e6:.1f} M"


# ----------------------------------------------------------------------------- the smallest change that fits


@dataclass(frozen=True)
class _Change:
    text: str
    values: tuple[tuple[str, Any], ...] = ()  # (dotted TrainConfig key, value)
    accelerate: tuple[str, Any] | None = None  # (file, AccelerateConfig)
    gpus: int | None = None

    @property
    def what(self) -> str:
        """What it changes (two changes of the same thing are never combined)."""
        return "accelerate" if self.accelerate else "gpus" if self.gpus else ",".join(key for key, _ in self.values)

    @property
    def overrides(self) -> tuple[str, ...]:
        return tuple(f"{key}={str(value).lower() if isinstance(value, bool) else value}" for key, value in self.values)


def _key_change(key: str, value: Any, text: str | None = None) -> _Change:
    return _Change(text or f"{key}={value}", ((key, value),))


def _candidate_changes(cfg, layout: _Layout, gpus: int, card: GpuCard, dims: ModelDims, alternatives: Sequence[tuple[str, Any]]) -> list[list[_Change]]:
    """Kinds of change in order of preference; each kind's variants from the mildest."""
    kinds: list[list[_Change]] = []
    vllm_whole, vllm_waves, vllm_raised = [], [], []
    if cfg.use_vllm and cfg.vllm_mode == "colocate":
        sequence_bytes = dims.kv_bytes_per_token(2) * (cfg.max_prompt_length + cfg.max_completion_length)
        needed = (2 * dims.parameters + VLLM_OWN_GIB * GIB + sequence_bytes) / (card.memory_gib * GIB)
        rollouts = cfg.completions_per_step // gpus

        def holds_every_rollout(share: float) -> bool:
            return (share * card.memory_gib * GIB - 2 * dims.parameters - VLLM_OWN_GIB * GIB) // sequence_bytes >= rollouts

        needed = (2 * dims.parameters + VLLM_OWN_GIB * GIB + sequence_bytes) / (card.memory_gib * GIB)
        if needed > cfg.vllm_gpu_memory_utilization:  # vLLM cannot start: only a larger share helps (one holding every rollout first)
            for step in range(math.ceil(needed * 20 - 1e-9), 20):
                vllm_raised.append(_key_change("vllm_gpu_memory_utilization", round(step / 20, 2), f"raise vllm_gpu_memory_utilization to {step / 20:.2f}"))
            vllm_raised.sort(key=lambda change: not holds_every_rollout(change.values[0][1]))
            kinds.append(vllm_raised)
        for step in range(round(cfg.vllm_gpu_memory_utilization * 20) - 1, 0, -1):
            share = step / 20
            change = _key_change("vllm_gpu_memory_utilization", round(share, 2), f"lower vllm_gpu_memory_utilization to {share:.2f}")
            (vllm_whole if holds_every_rollout(share) else vllm_waves).append(change)
    # A smaller vLLM share that still holds every rollout of the step at full length costs nothing but
    # memory, so it comes first; DeepSpeed costs communication (and CPU time when offloading).
    kinds.append(vllm_whole)
    ranked = sorted(
        ((_Layout.of(acc, gpus).sharding_rank, path, acc) for path, acc in alternatives if acc.distributed_type == "DEEPSPEED"),
        key=lambda item: (item[0], item[1]),
    )
    kinds.append([_Change(f"use {path}", accelerate=(path, acc)) for rank, path, acc in ranked if rank > layout.sharding_rank])
    kinds.append(vllm_waves)
    if not cfg.gradient_checkpointing:
        kinds.append([_key_change("gradient_checkpointing", True, "gradient_checkpointing=true")])
    kinds.append([_key_change("micro_batch_size", m) for m in _halvings(cfg.micro_batch_size)])
    if cfg.eval.every_steps > 0:
        kinds.append([_key_change("eval.batch_size", e) for e in _halvings(cfg.eval.batch_size)])
    kinds.append([_Change(f"more GPUs: --gpus {g}", gpus=g) for g in (2, 4, 8, 16) if g > gpus])
    return [kind for kind in kinds if kind]


def _halvings(value: int) -> Iterator[int]:
    value //= 2
    while value >= 1:
        yield value
        value //= 2


def _apply(cfg, accelerate_cfg, accelerate_file, gpus, changes: Sequence[_Change]):
    for change in changes:
        if change.accelerate is not None:
            accelerate_file, accelerate_cfg = change.accelerate
        if change.gpus is not None:
            gpus = change.gpus
        for key, value in change.values:
            cfg = _replace_key(cfg, key.split("."), value)
    if gpus > 1 and accelerate_cfg is None:  # more GPUs from a one-process launch: DDP
        from tomrl.config import load_config
        from tomrl.training.accelerate_config import AccelerateConfig

        accelerate_file = "configs/accelerate/multi_gpu.yaml"
        shipped = ACCELERATE_DIR / "multi_gpu.yaml"
        accelerate_cfg = load_config(AccelerateConfig, shipped) if shipped.exists() else AccelerateConfig()
    return cfg, accelerate_cfg, accelerate_file, gpus


def _replace_key(obj, path: list[str], value):
    if len(path) == 1:
        return replace(obj, **{path[0]: value})
    return replace(obj, **{path[0]: _replace_key(getattr(obj, path[0]), path[1:], value)})


MAX_COMBINED_CHANGES = 3


def _smallest_change(cfg, accelerate_cfg, gpus, card, dims, accelerate_file, alternatives) -> Suggestion | None:
    """The first change that fits: single changes in order of preference, then pairs, then triples."""
    import itertools

    kinds = _candidate_changes(cfg, _Layout.of(accelerate_cfg, gpus), gpus, card, dims, alternatives)

    def attempt(changes: Sequence[_Change]) -> Suggestion | None:
        try:
            new_cfg, new_acc, new_file, new_gpus = _apply(cfg, accelerate_cfg, accelerate_file, gpus, changes)
            _check_launch(new_cfg, new_acc, new_gpus)
        except (ValueError, TypeError):  # ConfigError is a ValueError: an impossible combination is no candidate
            return None
        result = _plan(new_cfg, new_acc, new_gpus, card, dims, new_file)
        if not result.fits:
            return None
        # Said in the order one applies them: the launch (accelerate config, GPUs), then the keys.
        ordered = sorted(changes, key=lambda c: (c.accelerate is None, c.gpus is None))
        text = " and ".join(c.text for c in ordered)
        if new_gpus != gpus and accelerate_cfg is None and not any(c.accelerate for c in changes):
            text += f" with --accelerate {new_file}"
        return Suggestion(text, tuple(o for c in ordered for o in c.overrides), new_file, new_gpus, result)

    for size in range(1, MAX_COMBINED_CHANGES + 1):
        for combination in itertools.combinations(kinds, size):
            if len({kind[0].what for kind in combination}) < size:
                continue
            # Mildest first: by the summed position of each change in its kind's list.
            indexed = itertools.product(*(list(enumerate(kind)) for kind in combination))
            for picked in sorted(indexed, key=lambda items: sum(index for index, _ in items)):
                found = attempt([change for _, change in picked])
                if found:
                    return found
    return None


# ----------------------------------------------------------------------------- output


def launch_command(config_path: str | None, overrides: Sequence[str], accelerate_file: str | None, gpus: int, accelerate_processes: int | None = None) -> str:
    """The command that trains what was planned."""
    tail = f"tomrl train --config {config_path or 'FILE'}" + "".join(f" {o}" for o in overrides)
    if accelerate_file is None:
        return tail
    processes = "" if accelerate_processes == gpus else f" --num_processes {gpus}"
    return f"accelerate launch --config_file {accelerate_file}{processes} -m {tail}"


def headline(result: Plan) -> str:
    """One line: peak per GPU against the card (what README and the configs quote)."""
    return f"≈ {result.peak_gib:.0f} GiB/GPU of {result.card.memory_gib:g} on {result.gpus} x {result.card.name} (tomrl plan)"


def format_plan(result: Plan) -> str:
    """The plan as text: memory per GPU by phase, host RAM, time per step, and the verdict."""
    d = result.dims
    lines = [
        f"tomrl plan: {result.model}, {result.parameters:,} parameters (hidden {d.hidden}, {d.layers} layers, {d.heads} heads / "
        f"{d.kv_heads} kv heads, intermediate {d.intermediate}, vocab {d.vocab}{', tied embeddings' if d.tied_embeddings else ''}; "
        f"dimensions from {d.source})",
        f"  {result.gpus} x {result.card.name} ({result.card.memory_gib:g} GiB); {result.strategy}; precision {result.precision}",
        "",
        "GPU memory per GPU (ESTIMATE)                                       GiB  held",
    ]
    width = 66
    for row in sorted(result.rows, key=lambda r: (r.phase != ALWAYS, PHASES.index(r.phase) if r.phase in PHASES else -1)):
        lines.append(f"  {row.label[:width]:<{width}} {row.gib:6.2f}  {row.phase}")
        lines.append(f"      = {row.formula}")
    phases = result.phase_gib
    largest = max(phases, key=lambda k: phases[k])
    phase_text = ", ".join(f"{k} {v:.1f}" for k, v in phases.items() if v > 0)
    lines.append(
        f"  peak = always {result.always_gib:.1f} + largest phase ({largest}) {phases[largest]:.1f} = {result.peak_gib:.1f} GiB "
        f"of {result.card.memory_gib:g} ({result.usable_gib:.1f} usable at {USABLE_FRACTION:.0%})   [phases: {phase_text}]"
    )
    lines.append("")
    lines.append(f"host RAM, the node (ESTIMATE): {result.host_steady_gib:.0f} GiB while training, at most {result.host_peak_gib:.0f} GiB")
    for row in result.host_rows:
        lines.append(f"  {row.label}: {row.gib:.1f} GiB ({row.formula}){'' if row.phase == ALWAYS else ' [' + row.phase + ']'}")
    lines.append("")
    lines.append(f"time per step (ESTIMATE, not a measurement; every completion at its token limit, so an upper bound): {result.step_seconds:.0f} s")
    for row in result.time_rows:
        lines.append(f"  {row.label}: {row.seconds:.1f} s  ({row.formula})")
    for note in result.notes:
        lines.append(f"note: {note}")
    lines.append("")
    if result.fits:
        lines.append(f"FITS: {headline(result)}")
        return "\n".join(lines)
    for problem in result.problems:
        lines.append(f"problem: {problem}")
    if result.peak_gib > result.usable_gib:
        lines.append(f"REFUSED: {result.peak_gib:.1f} GiB per GPU needed, {result.usable_gib:.1f} usable on a {result.card.memory_gib:g}-GiB card")
    else:
        lines.append("REFUSED")
    suggestion = result.suggestion
    if suggestion is not None:
        lines.append(f"smallest change that fits (re-planned): {suggestion.change} -> {headline(suggestion.plan)}")
    elif result.searched:
        lines.append(f"no combination of up to {MAX_COMBINED_CHANGES} changes makes it fit (accelerate configs, vllm_gpu_memory_utilization, "
                     "gradient_checkpointing, micro_batch_size, eval.batch_size, GPUs up to 16); use a larger card (--gpu h200) or LoRA (lora.enabled=true)")
    return "\n".join(lines)


__all__ = [
    "GPU_CARDS",
    "BUILTIN_MODELS",
    "GpuCard",
    "ModelDims",
    "MemoryRow",
    "TimeRow",
    "Plan",
    "Suggestion",
    "plan",
    "format_plan",
    "headline",
    "launch_command",
    "gpu_card",
    "model_dimensions",
    "dims_from_config",
    "lora_parameters",
    "shipped_accelerate_configs",
]
