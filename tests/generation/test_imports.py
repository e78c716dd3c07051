"""The generation package imports cleanly: base without torch, every module in any order (no import circle)."""

from __future__ import annotations

import subprocess
import sys

import pytest

MODULES = [
    "tomrl.generation",
    "tomrl.generation.base",
    "tomrl.generation.slots",
    "tomrl.generation.hf",
    "tomrl.generation.vllm",
    "tomrl.generation.openai",
    "tomrl.generation.registry",
]


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_base_and_package_do_not_import_torch():
    out = _run("import sys, tomrl.generation.base, tomrl.generation; print('torch' in sys.modules)")
    assert out.strip() == "False"


@pytest.mark.parametrize("first", MODULES)
def test_each_module_imports_first_in_a_fresh_interpreter(first):
    # Importing any module first, then all the others, must work: an import circle shows up as
    # an ImportError (partially initialised module) for some first module.
    rest = [m for m in MODULES if m != first]
    _run("; ".join(f"import {m}" for m in [first, *rest]))


def test_reverse_order_and_public_names():
    names = "Sampling Completion Engine make_engine register_engine cut_at_stop cut_completion eos_token_ids left_padded SlotModel SlotGenerator slot_path_supported pick_dtype default_device HFEngine"
    code = "; ".join(f"import {m}" for m in reversed(MODULES))
    _run(code + f"; import tomrl.generation as g; [getattr(g, n) for n in {names.split()!r}]")


def test_unknown_engine_lists_the_known_ones():
    from types import SimpleNamespace

    from tomrl.generation.registry import make_engine

    with pytest.raises(ValueError, match="known engines: hf, openai, vllm"):
        make_engine(SimpleNamespace(engine="nope"))


def test_register_engine_adds_an_engine_in_one_place(monkeypatch):
    from types import SimpleNamespace

    from tomrl.generation import registry

    monkeypatch.setattr(registry, "ENGINES", dict(registry.ENGINES))

    @registry.register_engine("echo")
    def make_echo(cfg):
        return SimpleNamespace(name="echo", model_name=cfg.model)

    assert registry.make_engine(SimpleNamespace(engine="echo", model="m")).model_name == "m"
    with pytest.raises(ValueError, match="already registered"):
        registry.register_engine("echo", make_echo)


def test_eval_config_accepts_a_registered_engine_and_names_the_known_ones(monkeypatch):
    from tomrl.config import ConfigError, load_config
    from tomrl.evaluation.config import EvalConfig
    from tomrl.generation import registry

    with pytest.raises(ConfigError, match="hf, openai, vllm"):
        load_config(EvalConfig, None, ["engine=echo"])
    monkeypatch.setattr(registry, "ENGINES", dict(registry.ENGINES))
    registry.register_engine("echo", lambda cfg: None)
    assert load_config(EvalConfig, None, ["engine=echo"]).engine == "echo"
