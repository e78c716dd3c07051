"""tomrl plan: the memory arithmetic against hand-computed values, the parameter counts against
transformers' own models, refusals that name a change that fits, and the launches the paper configs name."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tomrl.cli import main
from tomrl.config import ConfigError, load_config
from tomrl.training.accelerate_config import AccelerateConfig
from tomrl.training.config import TrainConfig
from tomrl.training.plan import (
    ALWAYS,
    BUILTIN_MODELS,
    GIB,
    OPTIMIZER_STEP,
    TRAINING,
    VALIDATION,
    ModelDims,
    format_plan,
    gpu_card,
    launch_command,
    lora_parameters,
    model_dimensions,
    plan,
)

REPO = Path(__file__).resolve().parents[2]
ACCELERATE = REPO / "configs" / "accelerate"
PAPER_CONFIGS = sorted((REPO / "configs" / "train").glob("paper_*.yaml"))

# A 2-layer Qwen2 small enough to count by hand.
TINY = ModelDims(hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16, intermediate=128, vocab=1000, tied_embeddings=True, model_type="qwen2", qkv_bias=True)
TINY_PARAMETERS = (
    1000 * 64  # embedding (tied with the LM head)
    + 2 * (64 * 64 + 64  # q and its bias
           + 2 * (64 * 32 + 32)  # k, v and their biases (2 kv heads x 16)
           + 64 * 64  # o
           + 3 * 64 * 128  # gate, up, down
           + 2 * 64)  # two RMSNorms
    + 64  # final norm
)


def _transformers_count(dims: ModelDims) -> int:
    """Parameters of transformers' own model of these dimensions, built on the meta device (no memory, exact count)."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    common = dict(
        hidden_size=dims.hidden, num_hidden_layers=dims.layers, num_attention_heads=dims.heads, num_key_value_heads=dims.kv_heads,
        intermediate_size=dims.intermediate, vocab_size=dims.vocab, tie_word_embeddings=dims.tied_embeddings,
    )
    config = Qwen2Config(**common) if dims.model_type == "qwen2" else LlamaConfig(head_dim=dims.head_dim, **common)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def _cfg(*overrides: str) -> TrainConfig:
    return load_config(TrainConfig, None, list(overrides))


def _paper(name: str, *overrides: str) -> TrainConfig:
    return load_config(TrainConfig, REPO / "configs" / "train" / f"{name}.yaml", list(overrides))


def _accelerate(name: str) -> AccelerateConfig:
    return load_config(AccelerateConfig, ACCELERATE / f"{name}.yaml")


# ----------------------------------------------------------------------------- parameter counts


def test_qwen25_05b_has_494_million_parameters():
    assert BUILTIN_MODELS["qwen/qwen2.5-0.5b-instruct"].parameters == 494_032_768
    assert model_dimensions("Qwen/Qwen2.5-0.5B-Instruct").parameters == 494_032_768  # the table, or a cached config.json


@pytest.mark.parametrize("hub_id", ["qwen/qwen2.5-0.5b-instruct", "qwen/qwen2.5-1.5b-instruct", "qwen/qwen2.5-3b-instruct",
                                    "qwen/qwen2.5-7b-instruct", "huggingfacetb/smollm2-135m-instruct"])
def test_table_counts_equal_transformers_models(hub_id):
    dims = BUILTIN_MODELS[hub_id]
    assert dims.parameters == _transformers_count(dims)


def test_tiny_count_by_hand_equals_transformers():
    assert TINY.parameters == TINY_PARAMETERS == _transformers_count(TINY)


def test_dimensions_from_a_local_folder_and_refusals(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    config = {"model_type": "qwen2", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "intermediate_size": 128, "vocab_size": 1000, "tie_word_embeddings": True}
    (folder / "config.json").write_text(json.dumps(config))
    dims = model_dimensions(str(folder))
    assert dims.parameters == TINY_PARAMETERS and dims.source == str(folder / "config.json")
    (folder / "config.json").write_text(json.dumps({**config, "num_experts": 8}))
    with pytest.raises(ConfigError, match="mixture-of-experts"):
        model_dimensions(str(folder))
    with pytest.raises(ConfigError, match="huggingface-cli download someone/unknown-model config.json"):
        model_dimensions("someone/unknown-model")


def test_lora_adapter_count_by_hand():
    # rank 8 on q (64->64), k and v (64->32), o (64->64), gate and up (64->128), down (128->64), two layers
    per_layer = 8 * ((64 + 64) + 2 * (64 + 32) + (64 + 64) + 3 * (64 + 128))
    assert lora_parameters(TINY, 8, ["all-linear"]) == 2 * per_layer
    assert lora_parameters(TINY, 8, ["q_proj", "v_proj"]) == 2 * 8 * ((64 + 64) + (64 + 32))


# ----------------------------------------------------------------------------- the arithmetic


def test_one_gpu_plan_by_hand():
    cfg = _cfg("prompts_per_step=2", "rollouts_per_prompt=4", "micro_batch_size=4", "max_prompt_length=100", "max_completion_length=28",
               "gradient_checkpointing=true", "kl_coef=0.001", "precision=bfloat16", "eval.batch_size=8", "eval.max_new_tokens=28")
    result = plan(cfg, None, 1, 10, dims=TINY)
    rows = {(r.label, r.phase): r.gib * GIB for r in result.rows}
    p = TINY_PARAMETERS
    b, s, h, layers, inter = 4, 128, 64, 2, 128
    assert rows[("policy weights, float32 master", ALWAYS)] == pytest.approx(4 * p)
    assert rows[("gradients, float32", ALWAYS)] == pytest.approx(4 * p)
    assert rows[("AdamW moments, float32", ALWAYS)] == pytest.approx(8 * p)
    assert rows[("reference model, float32 (kl_coef 0.001)", ALWAYS)] == pytest.approx(4 * p)
    assert rows[("bfloat16 autocast copy of the weights", TRAINING)] == pytest.approx(2 * p)
    # checkpointed layer inputs (float32 residual) + one layer recomputed + the attention mask
    activations = layers * b * s * h * 4 + b * s * (12 * h + 4 * inter) * 2 + b * s * s
    assert activations == 1_638_400
    assert rows[("activations (gradient checkpointing)", TRAINING)] == pytest.approx(activations)
    assert rows[("AdamW step temporary (torch foreach)", OPTIMIZER_STEP)] == pytest.approx(4 * p)
    # validation: 8 slots x (100 + 28) positions x 2 (k, v) x 2 layers x 2 kv heads x 16 x 2 B
    assert rows[("validation KV cache", VALIDATION)] == pytest.approx(8 * 128 * 2 * 2 * 2 * 16 * 2) == 262_144
    assert rows[("validation: bfloat16 copy of the weights to decode with", VALIDATION)] == pytest.approx(2 * p)
    fused = 2 * (64 * (4 + 2 * 2) * 16 + 2 * 64 * 128)  # q/k/v and gate/up weights of both layers
    assert rows[("validation: fused q/k/v and gate/up copies", VALIDATION)] == pytest.approx(2 * fused)
    # Rollouts (no vLLM): the slot decoder, in the float32 weights: its fused copies stay between steps, and
    # its cache has min(8 rollouts, 64) slots of 128 positions.
    assert rows[("slot decoder's fused q/k/v and gate/up copies", ALWAYS)] == pytest.approx(4 * fused)
    rollouts = 8 * 128 * 2 * 2 * 2 * 16 * 4
    assert rows[("rollout KV cache (slot decoder)", "rollouts")] == pytest.approx(rollouts)
    always = 20 * p + 4 * fused + 1.0 * GIB  # weights 4 + gradients 4 + moments 8 + reference 4; CUDA context 1 GiB
    training = 2 * p + activations
    validation = 2 * p + 2 * fused + 262_144
    assert result.peak_gib * GIB == pytest.approx(always + max(training, validation, 4 * p, rollouts))
    assert result.fits and result.suggestion is None
    assert "FITS" in format_plan(result) and "ESTIMATE" in format_plan(result)


def test_deepspeed_shards_and_offloads():
    cfg = _paper("paper_a_qwen2.5-7b")
    p = BUILTIN_MODELS["qwen/qwen2.5-7b-instruct"].parameters
    zero3 = plan(cfg, _accelerate("deepspeed_zero3"), 4, 80, suggest=False)
    offload = plan(cfg, _accelerate("deepspeed_zero3_offload"), 4, 80, suggest=False)
    rows3 = {r.label: r.gib * GIB for r in zero3.rows}
    assert rows3["policy weights, bf16 (÷ 4, ZeRO-3)"] == pytest.approx(2 * p / 4)
    assert rows3["float32 master weights + AdamW moments (÷ 4)"] == pytest.approx(12 * p / 4)
    assert rows3["reference model, bf16 (kl_coef 0.001) (÷ 4)"] == pytest.approx(2 * p / 4)
    assert rows3["vLLM, colocated"] == pytest.approx(0.35 * 80 * GIB)
    # Offloading moves the 12 B/parameter of optimizer state (and a float32 gradient partition) to the host.
    assert not any("master" in r.label for r in offload.rows)
    host = {r.label: r.gib * GIB for r in offload.host_rows}
    assert host["float32 master weights + AdamW moments + gradient partition (offloaded to cpu)"] == pytest.approx(16 * p)
    assert offload.always_gib < zero3.always_gib - 12 * p / 4 / GIB + 0.01


def test_vllm_that_cannot_start_is_refused_and_raised():
    cfg = _paper("paper_a_qwen2.5-7b", "vllm_gpu_memory_utilization=0.15")
    result = plan(cfg, _accelerate("deepspeed_zero3_offload"), 4, 80)
    assert not result.fits and result.problems and "vLLM cannot start" in result.problems[0]
    assert result.suggestion is not None and result.suggestion.change.startswith("raise vllm_gpu_memory_utilization")
    assert result.suggestion.plan.fits


def test_time_per_step_is_labelled_an_estimate_and_positive():
    result = plan(_paper("paper_a_qwen2.5-0.5b"), None, 1, card=gpu_card("a100-80gb"))
    assert result.step_seconds > 0 and [r.label.split(" ")[0] for r in result.time_rows] == ["rollouts", "forward/backward:"]
    assert "time per step (ESTIMATE, not a measurement" in format_plan(result)


# ----------------------------------------------------------------------------- refusals name a change that fits


def test_7b_ddp_on_80gb_is_refused_and_zero3_offload_replans_as_fitting():
    cfg = _paper("paper_a_qwen2.5-7b")
    refused = plan(cfg, _accelerate("multi_gpu"), 4, 80, accelerate_file="configs/accelerate/multi_gpu.yaml")
    assert not refused.fits and refused.peak_gib > 80
    suggestion = refused.suggestion
    assert suggestion is not None and suggestion.accelerate_file == "configs/accelerate/deepspeed_zero3_offload.yaml"
    assert suggestion.change == "use configs/accelerate/deepspeed_zero3_offload.yaml" and suggestion.gpus == 4
    # Planned again from scratch, the suggested launch fits, with the peak the suggestion quoted.
    again = plan(_paper("paper_a_qwen2.5-7b", *suggestion.overrides), _accelerate("deepspeed_zero3_offload"), suggestion.gpus, 80)
    assert again.fits and again.peak_gib == pytest.approx(suggestion.plan.peak_gib)
    text = format_plan(refused)
    assert "REFUSED" in text and "smallest change that fits (re-planned): use configs/accelerate/deepspeed_zero3_offload.yaml" in text


def test_suggestions_prefer_a_smaller_vllm_share_that_holds_every_rollout():
    cfg = _paper("paper_a_qwen2.5-1.5b", "vllm_gpu_memory_utilization=0.5")
    result = plan(cfg, None, 1, 80)
    assert not result.fits
    assert result.suggestion is not None and result.suggestion.overrides == ("vllm_gpu_memory_utilization=0.35",)


def test_a_plan_nothing_rescues_says_so():
    result = plan(_paper("paper_a_qwen2.5-7b"), None, 1, card=gpu_card("rtx4090"))
    assert not result.fits and result.suggestion is None
    assert "no combination of up to 3 changes" in format_plan(result)


# ----------------------------------------------------------------------------- the launches the configs name


def _plan_lines(path: Path) -> list[tuple[list[str], float, str]]:
    """``(tomrl plan arguments, quoted GiB, launch line below it)`` of a config's header."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("#")]
    found = []
    for index, line in enumerate(lines):
        match = re.match(r"#\s+tomrl plan (.*?)\s+# ≈ (\d+) GiB/GPU of", line)
        if match:
            found.append((shlex.split(match.group(1)), float(match.group(2)), lines[index + 1].lstrip("#").strip()))
    return found


@pytest.mark.parametrize("path", PAPER_CONFIGS, ids=lambda p: p.stem)
def test_paper_config_launches_fit_their_named_card(path, capsys):
    launches = _plan_lines(path)
    assert launches, f"{path.name}: no '#   tomrl plan ... # ≈ N GiB/GPU of M ...' line in the header"
    for arguments, quoted, launch in launches:
        assert main(["plan", *arguments]) == 0, capsys.readouterr().out
        out = capsys.readouterr().out
        peak = float(re.search(r"FITS: ≈ (\d+) GiB/GPU", out).group(1))
        assert peak == quoted, f"{path.name}: the header says {quoted:g} GiB, tomrl plan now says {peak:g}"
        printed = re.search(r"^launch: (.*)$", out, re.M).group(1)
        assert printed == launch, f"{path.name}: the header's launch differs from the planned one"


@pytest.mark.parametrize("path", sorted(ACCELERATE.glob("*.yaml")), ids=lambda p: p.stem)
def test_accelerate_config_examples_fit(path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    examples = [line.lstrip("#").split() for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("#   tomrl plan ")]
    assert examples, f"{path.name}: no '#   tomrl plan ...' example in the header"
    for words in examples:
        assert main(words[1:]) == 0, capsys.readouterr().out


def test_launch_command_names_the_process_count_when_it_differs():
    assert launch_command("c.yaml", [], None, 1) == "tomrl train --config c.yaml"
    assert launch_command("c.yaml", ["a=1"], "x.yaml", 4, 4) == "accelerate launch --config_file x.yaml -m tomrl train --config c.yaml a=1"
    assert launch_command("c.yaml", [], "x.yaml", 2, 4) == "accelerate launch --config_file x.yaml --num_processes 2 -m tomrl train --config c.yaml"


# ----------------------------------------------------------------------------- the command line


def test_exit_codes(capsys):
    config = "configs/train/paper_a_qwen2.5-0.5b.yaml"
    assert main(["plan", "--config", str(REPO / config), "--gpu", "a100-80gb"]) == 0
    assert main(["plan", "--config", str(REPO / "configs/train/paper_a_qwen2.5-7b.yaml"), "--gpu-memory", "80"]) == 1
    out = capsys.readouterr().out
    assert "REFUSED" in out and "check it:" in out and "launch it:" in out
    assert main(["plan", "--config", str(REPO / config), "--gpus", "0"]) == 2
    assert main(["plan", "--config", str(REPO / config), "--gpus", "2"]) == 2  # several GPUs need an accelerate config
    assert "--accelerate configs/accelerate/multi_gpu.yaml" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["plan", "--config", str(REPO / config), "--gpu", "a100-81gb"])
    assert exit_info.value.code == 2


def test_a_bad_key_is_the_usual_one_line_config_error(capsys):
    assert main(["plan", "--config", str(REPO / "configs/train/paper_a_qwen2.5-0.5b.yaml"), "micro_batch=8"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "unknown key 'micro_batch'" in err and "did you mean 'micro_batch_size'" in err


def test_unknown_card_names_the_known_ones():
    with pytest.raises(ConfigError, match="known: a100-40gb, a100-80gb, h100-80gb, h200, l40s, rtx4090"):
        gpu_card("v100")
    assert gpu_card("h100-80gb").memory_gib == pytest.approx(79.6)
    assert gpu_card(None, 48).memory_gib == 48


def test_plan_modules_import_without_torch_or_transformers():
    code = "import sys, tomrl.training.plan, tomrl.training.plan_command; print(sorted({'torch', 'transformers', 'trl'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def _readme_launches() -> list[tuple[list[str], float, int, str]]:
    """``(tomrl plan arguments, quoted GiB, quoted GPUs, line)`` of README's training launches that quote tomrl plan."""
    text = (REPO / "README.md").read_text(encoding="utf-8").replace("\\\n", " ")
    found = []
    for line in text.splitlines():
        match = re.match(r"(accelerate launch .*?-m |)tomrl train\s+(--config \S+.*?)\s+# .*≈ (\d+) GiB/GPU of \d+ on (\d+) x (\S+) \(tomrl plan", line)
        if not match:
            continue
        launcher, train, quoted, gpus, card = match.groups()
        arguments = [*shlex.split(train), "--gpu", card.lower()]
        accelerate = re.search(r"--config_file (\S+)", launcher)
        if accelerate:
            arguments += ["--accelerate", accelerate.group(1), "--gpus", gpus]
        found.append((arguments, float(quoted), int(gpus), line))
    return found


def test_readme_launches_fit_as_quoted(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    launches = _readme_launches()
    assert len(launches) >= 5, "README's GPU section lost its tomrl plan figures"
    for arguments, quoted, gpus, line in launches:
        assert main(["plan", *arguments]) == 0, line
        out = capsys.readouterr().out
        match = re.search(r"FITS: ≈ (\d+) GiB/GPU of \S+ on (\d+) x", out)
        assert (float(match.group(1)), int(match.group(2))) == (quoted, gpus), line
