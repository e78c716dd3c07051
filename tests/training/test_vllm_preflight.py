"""The vLLM path before it runs: the supported range, the preflight, and the importance-sampling key."""

from __future__ import annotations

import importlib.util
import inspect
import re
import tomllib
from pathlib import Path

import pytest
import torch
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tomrl.config import ConfigError, load_config
from tomrl.generation.vllm import SUPPORTED_VLLM, require_vllm, vllm_version_problem
from tomrl.training.config import TrainConfig
from tomrl.training.preflight import preflight

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs"
SMOKE = CONFIGS / "train" / "smoke_cpu.yaml"
PAPER_CONFIGS = [CONFIGS / "train" / f"paper_a_qwen2.5-{s}.yaml" for s in ("0.5b", "1.5b", "3b", "7b")]
PAPER_CONFIGS.append(CONFIGS / "train" / "paper_b_qwen2.5-7b.yaml")
VLLM_READY = importlib.util.find_spec("vllm") is not None and torch.cuda.is_available()
no_vllm_here = pytest.mark.skipif(VLLM_READY, reason="this machine has vLLM and a GPU")


@pytest.mark.parametrize(
    "found, supported",
    [
        ("0.27.0", True),
        ("0.30.0", True),
        ("0.30.0+cu129", True),  # a local build tag is its release (as in TRL's own check)
        ("0.30.1.dev4+g1234abc", True),
        ("0.26.0", False),  # pins torch==2.11.0
        ("0.31.0", False),  # asks for transformers<5.18
        ("0.31.0rc1", False),
        ("0.33.0", False),
    ],
)
def test_version_range(found, supported):
    problem = vllm_version_problem(found)
    assert (problem is None) == supported
    if not supported:
        assert f"found {found}" in problem and "pip install 'tomrl[vllm]'" in problem


def test_missing_or_unreadable_vllm_names_the_extra():
    assert vllm_version_problem(None) == f"vLLM {SUPPORTED_VLLM} (not installed: pip install 'tomrl[vllm]')"
    assert "pip install 'tomrl[vllm]'" in vllm_version_problem("not-a-version")


def test_the_extra_and_the_check_agree_and_sit_inside_trls_range():
    from trl.import_utils import is_vllm_available

    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    [requirement] = [Requirement(line) for line in extras["vllm"]]
    assert requirement.name == "vllm" and requirement.specifier == SpecifierSet(SUPPORTED_VLLM)
    # TRL warns outside the range it supports: `if not (Version("0.22.0") <= ... <= Version("0.31.0"))`.
    low, high = (Version(v) for v in re.findall(r'Version\("([\d.]+)"\)', inspect.getsource(is_vllm_available)))
    bounds = {spec.operator: Version(spec.version) for spec in SpecifierSet(SUPPORTED_VLLM)}
    assert low <= bounds[">="] and bounds["<"] <= high


@no_vllm_here
def test_require_vllm_fails_in_one_line_naming_the_fixes():
    with pytest.raises(ConfigError) as raised:
        require_vllm("engine=vllm", alternative="otherwise use engine=hf")
    message = str(raised.value)
    assert message.startswith("engine=vllm needs ") and message.endswith("; otherwise use engine=hf") and "\n" not in message
    if importlib.util.find_spec("vllm") is None:
        assert "pip install 'tomrl[vllm]'" in message
    if not torch.cuda.is_available():
        assert "a CUDA GPU" in message


@no_vllm_here
def test_training_preflight_stops_use_vllm_and_passes_without_it(tmp_path):
    paper_a = load_config(TrainConfig, PAPER_CONFIGS[0], [f"run_dir={tmp_path}"])
    assert paper_a.use_vllm
    with pytest.raises(ConfigError, match=r"^use_vllm=true needs .*; otherwise set use_vllm=false"):
        preflight(paper_a)
    preflight(load_config(TrainConfig, PAPER_CONFIGS[0], [f"run_dir={tmp_path}", "use_vllm=false"]))


def test_importance_sampling_key_defaults_to_trls():
    from trl import GRPOConfig

    trl_default = GRPOConfig.__dataclass_fields__["vllm_importance_sampling_correction"].default
    assert load_config(TrainConfig, SMOKE).vllm_importance_sampling_correction is trl_default is True
    assert load_config(TrainConfig, SMOKE, ["vllm_importance_sampling_correction=false"]).vllm_importance_sampling_correction is False


@pytest.mark.parametrize(
    "override, message",
    [
        ("vllm_importance_sampling_corection=false", "did you mean 'vllm_importance_sampling_correction'"),
        ("vllm_importance_sampling_correction=sometimes", "vllm_importance_sampling_correction"),
        ("vllm_gpu_memory_utilization=1.5", "vllm_gpu_memory_utilization"),
        ("vllm_gpu_memory_utilization=0", "vllm_gpu_memory_utilization"),
    ],
)
def test_bad_vllm_keys_are_errors_naming_the_key(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(TrainConfig, SMOKE, [override])


@pytest.mark.parametrize("path", PAPER_CONFIGS, ids=lambda p: p.name)
def test_paper_configs_turn_the_correction_off(path):
    cfg = load_config(TrainConfig, path)
    assert cfg.use_vllm and cfg.vllm_importance_sampling_correction is False
