"""Broken model folders and impossible generation lengths: one error line on every verb that loads a model.

A copy of the tiny test model is broken one way each (no tokenizer files, NaN or infinite weights, a
config.json whose hidden_size, vocab_size or num_hidden_layers contradicts the weights, a safetensors file
with a garbage header, an unknown dtype or offsets that disagree with a shape) and given to ``tomrl eval``,
``tomrl analyze probes``, ``tomrl analyze interventions``, ``tomrl train`` and ``tomrl demo``. What can be
read from config.json and the safetensors headers is refused before any output
(:func:`tomrl.models.check_model_reference`); NaN weights right after loading
(:func:`tomrl.models.check_finite_weights`). A ``max_new_tokens`` beyond the model's context (its
config.json) is refused before any work; before the check, ``tomrl eval max_new_tokens=1000000000000``
generated until it was killed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from reliability_helpers import REPO_ROOT, cli_env, one_error, run_cli

from tomrl.cli import main
from tomrl.config import ConfigError, load_config
from tomrl.io import BadInputError
from tomrl.training.config import TrainConfig

SMOKE = str(REPO_ROOT / "configs" / "train" / "smoke_cpu.yaml")
EVAL = ["--benchmark", "tomrl-hitom-order0", "--limit", "1", "heldout_n=2", "max_new_tokens=4"]


def _edit_config(folder: Path, **changes) -> None:
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


def _edit_weights(folder: Path, edit) -> None:
    from safetensors.torch import load_file, save_file

    file = folder / "model.safetensors"
    weights = load_file(file)
    edit(weights)
    save_file(weights, file, metadata={"format": "pt"})


def _edit_header(folder: Path, edit) -> None:
    """Rewrite the first tensor's header entry in place (the header keeps its length: padded with spaces)."""
    file = folder / "model.safetensors"
    data = file.read_bytes()
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    edit(next(entry for key, entry in header.items() if key != "__metadata__"))
    text = json.dumps(header, separators=(",", ":")).encode()
    assert len(text) <= size
    file.write_bytes(data[:8] + text.ljust(size) + data[8 + size :])


def _garbage_header(folder: Path) -> None:
    file = folder / "model.safetensors"
    data = file.read_bytes()
    size = int.from_bytes(data[:8], "little")
    file.write_bytes(data[:8] + b"\x00garbage" * (size // 8) + b"}" * (size % 8) + data[8 + size :])


def _no_tokenizer(folder: Path) -> None:
    for file in folder.iterdir():
        if file.name not in ("config.json", "generation_config.json", "model.safetensors"):
            file.unlink()


def _set_first(name_part: str, value: float):
    def edit(weights):
        key = next(k for k in sorted(weights) if name_part in k)
        weights[key].view(-1)[0] = value

    return edit


# name -> (how the copy is broken, the text its error must contain, checked before loading)
BREAKS = {
    "no tokenizer files": (_no_tokenizer, "has no tokenizer", True),
    "a NaN weight": (lambda f: _edit_weights(f, _set_first("mlp.up_proj", float("nan"))), "holds NaN or infinite values", False),
    "an infinite weight": (lambda f: _edit_weights(f, _set_first("input_layernorm", float("inf"))), "holds NaN or infinite values", False),
    "hidden_size 128 for 64-wide weights": (lambda f: _edit_config(f, hidden_size=128, intermediate_size=256), "says hidden_size 128", True),
    "vocab_size 100 more than the weights": (lambda f: _edit_config(f, vocab_size=json.loads((f / "config.json").read_text())["vocab_size"] + 100),
                                             "says vocab_size", True),
    "num_hidden_layers 4 for 2 layers": (lambda f: _edit_config(f, num_hidden_layers=4), "says num_hidden_layers 4, but the weights hold 2 layers", True),
    "a garbage safetensors header": (_garbage_header, "not a safetensors file", True),
    "an unknown dtype": (lambda f: _edit_header(f, lambda entry: entry.update(dtype="Q9")), "unknown dtype 'Q9'", True),
    "offsets that disagree with the shape": (lambda f: _edit_header(f, lambda entry: entry.update(shape=[entry["shape"][0], 2 * entry["shape"][1]])),
                                             "its data_offsets give", True),
}
PRE_LOAD = [name for name, (_, _, before) in BREAKS.items() if before]


@pytest.fixture(scope="module")
def tiny(hermetic_home) -> Path:
    from tomrl.models import TINY_MODEL

    return hermetic_home / "models" / TINY_MODEL


@pytest.fixture(scope="module")
def broken(tmp_path_factory, tiny) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("broken_model_folders")
    folders = {}
    for number, (name, (breaking, _, _)) in enumerate(BREAKS.items()):
        folders[name] = shutil.copytree(tiny, root / f"model{number}")
        breaking(folders[name])
    return folders


@pytest.fixture(scope="module")
def questions(tmp_path_factory, generated_examples) -> Path:
    from tomrl.schema import write_examples

    path = tmp_path_factory.mktemp("questions") / "questions.jsonl"
    write_examples(path, generated_examples[0])
    return path


def test_the_unbroken_copy_loads(tiny, tmp_path):
    """Control: the copy every case starts from passes every check and loads (so each case fails on its break)."""
    from tomrl.models import load_model, load_tokenizer, model_reference_problem

    folder = shutil.copytree(tiny, tmp_path / "model")
    assert model_reference_problem(str(folder)) is None
    assert load_tokenizer(str(folder))("The box.", add_special_tokens=False)["input_ids"]
    assert load_model(str(folder), dtype="float32") is not None


@pytest.mark.parametrize("which", PRE_LOAD)
def test_the_header_checks_find_each_break_before_loading(which, broken):
    from tomrl.models import model_reference_problem

    assert BREAKS[which][1] in model_reference_problem(str(broken[which]))


@pytest.mark.parametrize("which", list(BREAKS))
def test_loading_a_broken_folder_is_a_bad_input_error(which, broken):
    """The load functions themselves refuse every case (whoever calls them, whatever they checked before)."""
    from tomrl.models import load_model, load_tokenizer

    folder = str(broken[which])
    with pytest.raises(BadInputError, match="tokenizer has no vocabulary" if which == "no tokenizer files" else BREAKS[which][1]):
        load_tokenizer(folder) if which == "no tokenizer files" else load_model(folder, dtype="float32")


@pytest.mark.parametrize("which", list(BREAKS))
def test_eval_on_a_broken_model_folder(which, broken, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["eval", "--model", str(broken[which]), "--out", str(out), *EVAL]) == 2
    assert BREAKS[which][1] in one_error(capsys.readouterr().err, alone=False)
    if BREAKS[which][2]:
        assert not out.exists()
    else:  # found once loaded: the folder holds no answer, and the corrected command runs in it
        assert not (out / "samples.jsonl").exists() or not (out / "samples.jsonl").read_text().strip()


def test_eval_after_a_nan_model_resumes_with_the_corrected_one(broken, tiny, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["eval", "--model", str(broken["a NaN weight"]), "--out", str(out), *EVAL]) == 2
    capsys.readouterr()
    assert main(["eval", "--model", str(tiny), "--out", str(out), *EVAL]) == 0
    assert len((out / "samples.jsonl").read_text().splitlines()) == 1


@pytest.mark.parametrize("which", ["no tokenizer files", "a NaN weight", "hidden_size 128 for 64-wide weights", "an unknown dtype"])
def test_analyze_probes_on_a_broken_model_folder(which, broken, questions, tmp_path, capsys):
    out = tmp_path / "probes"
    assert main(["analyze", "probes", "--model", f"m={broken[which]}", "--data", str(questions), "--out", str(out), "--limit", "6"]) == 2
    assert BREAKS[which][1] in one_error(capsys.readouterr().err, alone=False)
    assert not (out / "probes.json").exists() and not list(out.glob("features-*"))


@pytest.mark.parametrize("which", ["no tokenizer files", "a NaN weight", "hidden_size 128 for 64-wide weights", "an unknown dtype"])
def test_analyze_interventions_on_a_broken_model_folder(which, broken, questions, tmp_path, capsys):
    out = tmp_path / "interventions"
    args = ["analyze", "interventions", "--model", f"m={broken[which]}", "--data", str(questions), "--out", str(out), "--limit", "2",
            "--max-new-tokens", "4"]
    assert main(args) == 2
    error = one_error(capsys.readouterr().err, alone=False)
    assert BREAKS[which][1] in error or (which == "no tokenizer files" and "tokenizer has no vocabulary" in error)
    assert not (out / "traces.jsonl").exists() and not (out / "samples.jsonl").exists()
    assert which == "a NaN weight" or not out.exists()  # values need loading; every other break is found before run.json


@pytest.mark.parametrize("which", ["no tokenizer files", "hidden_size 128 for 64-wide weights", "num_hidden_layers 4 for 2 layers", "an unknown dtype"])
def test_train_on_a_broken_model_folder_fails_before_the_run_folder(which, broken, tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main(["train", "--config", SMOKE, f"run_dir={run_dir}", f"model={broken[which]}"]) == 2
    assert BREAKS[which][1] in one_error(capsys.readouterr().err, alone=False)
    assert not run_dir.exists()


def test_train_on_nan_weights_is_one_error_line(broken, tmp_path, capsys):
    run_dir = tmp_path / "run"
    code = main(["train", "--config", SMOKE, f"run_dir={run_dir}", f"model={broken['a NaN weight']}", "max_steps=1",
                 "eval.every_steps=0", "eval.at_start=false"])
    assert code == 2
    assert "holds NaN or infinite values" in one_error(capsys.readouterr().err, alone=False)


def test_demo_on_a_folder_without_tokenizer_writes_nothing(broken, tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", f"model={broken['no tokenizer files']}", f"out_dir={out}"]) == 2
    assert "has no tokenizer" in one_error(capsys.readouterr().err, alone=False)
    assert not out.exists()


# ----------------------------------------------------------------------------- generation length against the context


def test_eval_max_new_tokens_beyond_the_context_fails_before_any_work(hermetic_home, tiny, tmp_path):
    """A subprocess with a timeout: before the check this ran until killed."""
    out = tmp_path / "run"
    result = run_cli(["eval", "--model", str(tiny), "--benchmark", "tomrl-hitom-order0", "--limit", "1", "--out", str(out),
                      "heldout_n=2", "max_new_tokens=1000000000000"], cli_env(hermetic_home), tmp_path, timeout=120)
    assert result.returncode == 2
    error = one_error(result.stderr, alone=False)
    assert "max_new_tokens" in error and "1000000000000" in error and "4096" in error and "give at most 4096" in error
    assert not out.exists()


def test_the_context_is_read_from_config_json_and_the_limit_is_inclusive(tiny, tmp_path):
    from tomrl.models import check_generation_length, model_context_length

    assert model_context_length(str(tiny)) == (4096, "max_position_embeddings in config.json")
    check_generation_length(str(tiny), 4096, key="max_new_tokens")
    with pytest.raises(ConfigError, match=r"key 'max_new_tokens': 4097 new tokens cannot fit .*4096 tokens"):
        check_generation_length(str(tiny), 4097, key="max_new_tokens")
    folder = shutil.copytree(tiny, tmp_path / "yarn")
    _edit_config(folder, rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096})
    assert model_context_length(str(folder))[0] == 16384
    _edit_config(folder, max_position_embeddings=None, rope_scaling=None)
    assert model_context_length(str(folder)) is None  # the tokenizer's model_max_length is "unknown" (1e30): nothing to check
    assert model_context_length("no-such-org/no-such-model") is None  # a hub id: checked by the engine once loaded


def test_the_hf_engine_refuses_a_budget_beyond_the_context(tiny):
    """Where the config was not on disk before loading (a hub id), the engine checks once the model is loaded."""
    from tomrl.generation import HFEngine, Sampling

    engine = HFEngine(str(tiny), dtype="float32", device="cpu")
    with pytest.raises(ConfigError, match="max_new_tokens: 5000 new tokens cannot fit"):
        list(engine.generate(["Where is the apple?"], Sampling(temperature=0, max_new_tokens=5000)))
    assert len(list(engine.generate(["Where is the apple?"], Sampling(temperature=0, max_new_tokens=2)))) == 1


def test_analyze_interventions_max_new_tokens_beyond_the_context_is_one_error_line(tiny, questions, tmp_path, capsys):
    out = tmp_path / "interventions"
    args = ["analyze", "interventions", "--model", f"m={tiny}", "--data", str(questions), "--out", str(out), "--limit", "2",
            "--max-new-tokens", "100000000000"]
    assert main(args) == 2
    assert "100000000000 new tokens cannot fit" in one_error(capsys.readouterr().err, alone=False)
    assert not out.exists()  # checked before run.json: the corrected command is not refused as "other settings"


def test_demo_eval_max_new_tokens_beyond_the_context_writes_nothing(tiny, tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", f"model={tiny}", f"out_dir={out}", "eval_max_new_tokens=100000"]) == 2
    assert "100000 new tokens cannot fit" in one_error(capsys.readouterr().err, alone=False)
    assert not out.exists()


@pytest.mark.parametrize("override", ["max_completion_length=1000000000000", "eval.max_new_tokens=1000000000000"])
def test_train_generation_lengths_beyond_the_context_fail_in_the_config(tiny, override):

    with pytest.raises(ConfigError, match="1000000000000 new tokens cannot fit"):
        load_config(TrainConfig, SMOKE, [f"model={tiny}", override])


# --------------------------------------------------------------------------- a LoRA run's final/: base + adapter


@pytest.fixture(scope="module")
def lora_final(tmp_path_factory, tiny) -> Path:
    """The final/ of a 1-step LoRA run of the tiny model: adapter_config.json + adapter_model.safetensors + tokenizer."""
    from tomrl.training.run import train

    run_dir = tmp_path_factory.mktemp("lora") / "run"
    cfg = load_config(TrainConfig, SMOKE, [
        f"model={tiny}", f"run_dir={run_dir}", "lora.enabled=true", "lora.rank=4", "max_steps=1", "eval.every_steps=0",
        "progress=false", "rollouts_per_prompt=2", "max_completion_length=8", "learning_rate=1e-2"])
    train(cfg)
    final = run_dir / "final"
    assert (final / "adapter_config.json").is_file() and not (final / "config.json").exists()
    # The tiny model's rewards are all equal, so one step leaves LoRA's B matrices at their zero start:
    # give them values, so that an adapter that is attached changes the logits.
    import torch
    from safetensors.torch import load_file, save_file

    tensors = load_file(final / "adapter_model.safetensors")
    generator = torch.Generator().manual_seed(0)
    save_file({k: torch.randn(t.shape, generator=generator) * 0.5 if "lora_B" in k else t for k, t in tensors.items()},
              final / "adapter_model.safetensors")
    return final


def test_eval_scores_a_lora_runs_final_folder(lora_final, tiny, questions, tmp_path, capsys):
    """tomrl's own LoRA output is a model: base + adapter, loaded by transformers, evaluated like any other."""
    import torch

    from tomrl.models import load_model, model_reference_problem

    assert model_reference_problem(str(lora_final)) is None
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        adapted, base = load_model(str(lora_final))(ids).logits, load_model(str(tiny))(ids).logits
    assert not torch.equal(adapted, base)  # the adapter is attached, not dropped
    out = tmp_path / "eval"
    assert main(["eval", "--model", str(lora_final), "--benchmark", str(questions), "--limit", "2", "--greedy",
                 "max_new_tokens=4", "--out", str(out)]) == 0, capsys.readouterr().err
    assert json.loads((out / "results.json").read_text())["model"] == str(lora_final)


@pytest.mark.parametrize("damage, message", [
    ("base", "is an adapter of /nowhere/base, which cannot load: /nowhere/base: no such folder"),
    ("weights", "has no adapter weights (adapter_model.safetensors)"),
    ("pickled", "holds a pickled adapter (adapter_model.bin)"),
    ("config", "field 'base_model_name_or_path'"),
])
def test_a_broken_adapter_folder_is_one_error_line(lora_final, questions, tmp_path, capsys, damage, message):
    folder = tmp_path / "final"
    shutil.copytree(lora_final, folder)
    config = json.loads((folder / "adapter_config.json").read_text())
    if damage == "base":
        config["base_model_name_or_path"] = "/nowhere/base"
    elif damage == "config":
        config.pop("base_model_name_or_path")
    elif damage in ("weights", "pickled"):
        (folder / "adapter_model.safetensors").rename(folder / ("adapter_model.bin" if damage == "pickled" else "gone"))
    (folder / "adapter_config.json").write_text(json.dumps(config))
    out = tmp_path / "eval"
    assert main(["eval", "--model", str(folder), "--benchmark", str(questions), "--limit", "1", "--out", str(out)]) == 2
    assert message in one_error(capsys.readouterr().err)
    assert not out.exists()
