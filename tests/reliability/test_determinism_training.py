"""Determinism of training: same seed, same machine, same weights, whether the machine is idle or loaded.

- ``precision: auto`` is decided from the CPU's features alone (it was a timing probe, which chose float32
  on a loaded machine and bfloat16 on an idle one).
- Two warm starts of a small model on the same rows with the same seed give the same gradients at every
  step and byte-identical weights, one of them while other processes keep every core busy. The model is
  large enough (4 layers, 2 key/value heads of 64) that the backward pass of the shared prompt's repeated
  keys and values adds 4 rows over 32,768 or more elements, which torch's CPU kernel does with atomic adds
  from several threads, in whatever order they run, unless deterministic algorithms are on: without
  :func:`tomrl.models.make_torch_deterministic` this test failed 3 times in 3.
- A run's frozen data are byte-identical across processes with different string hashing.
- (slow) The quick demo twice on that model, with a warm start and RL steps, one under load: the same
  warm-start and final weights, metrics.jsonl and evaluation results.

Runs train in subprocesses with 2 threads (the multi-threaded kernels are the ones that can race) and
different ``PYTHONHASHSEED``s, so the torch settings they make stay out of the test process.

    pytest tests/reliability/test_determinism_training.py            # ~70 s; -m slow for the demo pair
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from reliability_helpers import REPO_ROOT, cli_env, jsonl_rows, run_cli

# --------------------------------------------------------------------------- precision auto


def test_precision_auto_is_a_function_of_cpu_features_only():
    from tomrl.models import cpu_precision

    assert cpu_precision({"avx512_bf16"})[0] == "bfloat16"
    assert cpu_precision({"amx_tile"})[0] == "bfloat16"
    assert cpu_precision({"avx512_bf16", "amx_tile", "avx2"})[0] == "bfloat16"
    for features in (set(), {"avx2"}, {"avx512f", "avx512bw", "avx512_vnni"}):  # AVX512 without BF16 emulates bf16
        chosen, why = cpu_precision(features)
        assert chosen == "float32" and "no native bf16" in why
    assert "avx512_bf16" in cpu_precision({"avx512_bf16"})[1]  # the reason names the feature


def test_deterministic_kernels_default_on_for_cpus_off_for_gpus_and_say_why(tmp_path):
    """The decision recorded in summary.json / done.json. Off leaves torch untouched (checked in a fresh process:
    the training tests in this one have switched deterministic algorithms on)."""
    script = (
        "import torch; from tomrl.models import make_torch_deterministic as m\n"
        "print(m('cuda', None)); print(m('cpu', False)); print(torch.are_deterministic_algorithms_enabled())\n"
        "print(m('cpu', None)); print(torch.are_deterministic_algorithms_enabled())\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=cli_env(tmp_path)).stdout.splitlines()
    assert out[0] == "deterministic kernels off: GPU default (set deterministic=true for bit-identical reruns)"
    assert out[1] == "deterministic kernels off: deterministic=false" and out[2] == "False"
    assert out[3] == "deterministic kernels on (CPU default)" and out[4] == "True"


def test_precision_auto_on_this_cpu_follows_its_flags_and_ignores_timings(monkeypatch):
    import tomrl.models as models

    flags = _proc_cpuinfo_flags()
    features = models.cpu_features()
    if flags is not None:  # Linux: torch's cpuinfo agrees with the kernel's flags
        assert ("avx512_bf16" in features) == ("avx512_bf16" in flags)
        assert ("amx_tile" in features) == ("amx_tile" in flags)
    expected = models.cpu_precision(features)
    assert models.resolve_precision("auto", "cpu") == expected
    # Clocks that stand still or make every measured interval take hours must not move the decision.
    ticks = itertools.count(1)
    for clock in (lambda: 0.0, lambda: 1e12 * next(ticks)):
        monkeypatch.setattr(time, "perf_counter", clock)
        monkeypatch.setattr(time, "time", clock)
        monkeypatch.setattr(time, "monotonic", clock)
        assert models.resolve_precision("auto", "cpu") == expected
    monkeypatch.undo()
    # Nor may a load on the machine while it decides.
    with _cpu_load():
        assert models.resolve_precision("auto", "cpu") == expected
    assert models.cpu_runs_bf16_fast() == (expected[0] == "bfloat16", expected[1])
    assert models.resolve_precision("float32", "cpu")[0] == "float32"
    assert models.resolve_precision("bfloat16", "cpu")[0] == "bfloat16"  # an explicit choice is obeyed, even where slow


def _proc_cpuinfo_flags() -> set[str] | None:
    path = Path("/proc/cpuinfo")
    if not path.exists():
        return None
    for line in path.read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return None


# --------------------------------------------------------------------------- warm start


@contextlib.contextmanager
def _cpu_load():
    """Every core kept busy by processes this test starts (and ends)."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        time.sleep(0.5)
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait(timeout=30)


@pytest.fixture(scope="module")
def small_model(tmp_path_factory) -> Path:
    """A 4-layer Qwen2 (hidden 256, 2 key/value heads of 64) with the embedded tokenizer: seconds per step,
    yet the shared prompt's key/value gradients reach torch's threaded accumulation (4 rows x 2 heads x
    ~190 prompt tokens x 64 > 32,768), in every layer (with one layer the race showed too rarely)."""
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    from tomrl.models import embedded_tokenizer_dir

    folder = tmp_path_factory.mktemp("small-qwen2")
    tokenizer = AutoTokenizer.from_pretrained(str(embedded_tokenizer_dir()))
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
                         num_key_value_heads=2, max_position_embeddings=4096, tie_word_embeddings=True,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.eos_token_id)
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder


# The demo's warm start in small: the paper_a prompt (whose long system prompt is the shared prefix),
# micro-batches of 4 rows, two of them per step, bf16 autocast where the CPU computes bf16 natively.
WARM_START_OVERRIDES = ["seed=0", "precision=auto", "prompt.style=paper_a", "micro_batch_size=4", "warm_start.batch_size=8",
                        "warm_start.max_steps=2", "warm_start.learning_rate=1.0e-3", "max_prompt_length=512",
                        "max_completion_length=128", "progress=false"]

# The weights alone can hide a race: Adam's first update is lr * sign(gradient) whatever the gradient's last
# bits, so the worker also records a hash of every step's gradients (through fine_tune's callbacks).
FINE_TUNE = """
import hashlib, json, sys
from pathlib import Path
from transformers import TrainerCallback
from tomrl.config import load_config
from tomrl.training.config import TrainConfig
from tomrl.training.sft_warmstart import fine_tune
model, rows, folder, *overrides = sys.argv[1:]

class GradientHashes(TrainerCallback):
    hashes = []
    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        digest = hashlib.sha256()
        for parameter in model.parameters():
            if parameter.grad is not None:
                digest.update(parameter.grad.detach().float().contiguous().numpy().tobytes())
        self.hashes.append(digest.hexdigest())

cfg = load_config(TrainConfig, None, [f"model={model}", *overrides])
fine_tune(cfg, model, json.loads(Path(rows).read_text()), Path(folder), say=lambda message: None, callbacks=[GradientHashes()])
Path(folder, "gradient_hashes.json").write_text(json.dumps(GradientHashes.hashes))
"""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _training_env(home: Path, hash_seed: str) -> dict[str, str]:
    # Two threads even on a one-core machine: the multi-threaded kernels are the ones that can race.
    return cli_env(home, OMP_NUM_THREADS="2", PYTHONHASHSEED=hash_seed)


def test_warm_start_weights_are_identical_across_runs_idle_and_loaded(tmp_path, small_model, hermetic_home):
    from tomrl.config import load_config
    from tomrl.generators import generate
    from tomrl.generators.config import GenerateConfig
    from tomrl.models import load_tokenizer
    from tomrl.training.config import TrainConfig
    from tomrl.training.sft_warmstart import trace_rows

    cfg = load_config(TrainConfig, None, [f"model={small_model}", *WARM_START_OVERRIDES])
    examples = generate(GenerateConfig(benchmark="hitom", n=8, seed=3, lengths=[1], orders=[0, 1, 2], agents=4, deception=[False]))
    rows = trace_rows(examples, load_tokenizer(str(small_model)), cfg.prompt)
    assert len(rows) == 8
    rows_file = tmp_path / "rows.json"
    rows_file.write_text(json.dumps(rows))
    done = {}
    for name, hash_seed, load in (("idle", "1", contextlib.nullcontext()), ("loaded", "2", _cpu_load())):
        with load:
            result = subprocess.run([sys.executable, "-c", FINE_TUNE, str(small_model), str(rows_file), str(tmp_path / name), *WARM_START_OVERRIDES],
                                    env=_training_env(hermetic_home, hash_seed), cwd=tmp_path, capture_output=True, text=True, timeout=900)
        assert result.returncode == 0, result.stderr[-3000:]
        done[name] = json.loads((tmp_path / name / "done.json").read_text())
    idle, loaded = done["idle"], done["loaded"]
    assert idle["steps"] == loaded["steps"] == 2
    assert idle["precision"] == loaded["precision"] and idle["precision_reason"] == loaded["precision_reason"]
    assert idle["torch_threads"] == loaded["torch_threads"] == 2
    assert (idle["first_loss"], idle["last_loss"]) == (loaded["first_loss"], loaded["last_loss"])
    gradients = [json.loads((tmp_path / name / "gradient_hashes.json").read_text()) for name in ("idle", "loaded")]
    assert len(gradients[0]) == 2 and gradients[0] == gradients[1], "same rows, same seed, other gradients"
    assert _sha256(tmp_path / "idle" / "model" / "model.safetensors") == _sha256(tmp_path / "loaded" / "model" / "model.safetensors")


# --------------------------------------------------------------------------- end to end (slow)

# Timings and speeds differ between runs by nature; everything else in metrics.jsonl must not.
TIMING_KEYS = ("time", "per_s", "seconds")


def _without_timings(row: dict) -> dict:
    return {key: value for key, value in row.items() if not any(part in key for part in TIMING_KEYS)}


# The quick demo on the small model, with a warm start, micro-batches of 4 rows sharing a prompt (with 2
# rows the threaded accumulation is a + b = b + a: no race to see) and an entropy bonus (a random model's
# rollouts all score the same, so without it the RL steps' gradients would be zero and could not differ).
DEMO_TRAINING = ["max_steps=2", "rollouts_per_prompt=4", "micro_batch_size=4", "warm_start.enabled=true", "warm_start.max_steps=2",
                 "warm_start.batch_size=8", "entropy_coef=0.01"]


@pytest.mark.slow
def test_quick_demo_is_identical_across_runs_idle_and_loaded(tmp_path, small_model, hermetic_home):
    """``tomrl demo --config configs/demo/quick.yaml`` (data, base evaluation, warm start, 2 GRPO steps,
    evaluations) twice, the second under load and with another PYTHONHASHSEED: the same data, warm-start and
    final weights, metrics.jsonl (timings aside) and evaluation results."""
    args = ["demo", "--config", str(REPO_ROOT / "configs" / "demo" / "quick.yaml"), f"model={small_model}",
            "train_overrides=[" + ", ".join(DEMO_TRAINING) + "]"]
    for name, hash_seed, load in (("idle", "1", contextlib.nullcontext()), ("loaded", "2", _cpu_load())):
        with load:
            result = run_cli([*args, f"out_dir={tmp_path / name}"], _training_env(hermetic_home, hash_seed), tmp_path, timeout=1200)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
        assert "precision auto: " in result.stdout  # the decision and its reason, printed
    idle, loaded = tmp_path / "idle", tmp_path / "loaded"
    for relative in ("train/data/train.jsonl", "train/warm_start/model/model.safetensors", "train/final/model.safetensors"):
        assert _sha256(idle / relative) == _sha256(loaded / relative), f"{relative} differs"
    idle_rows, loaded_rows = jsonl_rows(idle / "train" / "metrics.jsonl"), jsonl_rows(loaded / "train" / "metrics.jsonl")
    assert len(idle_rows) == 2 and all(row["grad_norm"] > 0 for row in idle_rows)
    assert [_without_timings(r) for r in idle_rows] == [_without_timings(r) for r in loaded_rows]
    comparisons = [json.loads((folder / "comparison.json").read_text())["rows"] for folder in (idle, loaded)]
    assert comparisons[0] == comparisons[1]
    summaries = [json.loads((folder / "train" / "summary.json").read_text()) for folder in (idle, loaded)]
    assert summaries[0]["precision"] == summaries[1]["precision"] and summaries[0]["precision_reason"].startswith("precision auto")
    warm_starts = [json.loads((folder / "train" / "warm_start" / "done.json").read_text()) for folder in (idle, loaded)]
    assert warm_starts[0]["last_loss"] == warm_starts[1]["last_loss"] and warm_starts[0]["precision"] == summaries[0]["precision"]


# --------------------------------------------------------------------------- a run's data

PREPARE_DATA = """
import sys
from tomrl.config import load_config
from tomrl.training.config import TrainConfig
from tomrl.training.data import prepare_data
config, run_dir = sys.argv[1:]
prepare_data(load_config(TrainConfig, config), run_dir)
"""


def test_a_runs_data_are_byte_identical_across_processes(tmp_path, hermetic_home):
    """The demo's curriculum (two generated stages, shuffled with the seed, and a dev split disjoint from
    them), frozen by two processes with different string hashing."""
    config = str(REPO_ROOT / "configs" / "train" / "demo_cpu.yaml")
    for hash_seed in ("1", "2"):
        result = subprocess.run([sys.executable, "-c", PREPARE_DATA, config, str(tmp_path / hash_seed)],
                                env=cli_env(hermetic_home, PYTHONHASHSEED=hash_seed), cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
    for name in ("train.jsonl", "validation.jsonl"):
        assert _sha256(tmp_path / "1" / "data" / name) == _sha256(tmp_path / "2" / "data" / name), name
