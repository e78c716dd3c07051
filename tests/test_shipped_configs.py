"""Every YAML file shipped under configs/ loads into its config class (searched recursively)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tomrl.config import config_class_for, load_config

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
YAML_FILES = sorted(p for p in CONFIGS.rglob("*.y*ml") if p.suffix in (".yaml", ".yml"))


def test_configs_exist():
    assert YAML_FILES, "no YAML configs shipped"


@pytest.mark.parametrize("path", YAML_FILES, ids=lambda p: str(p.relative_to(CONFIGS)))
def test_config_loads(path):
    cls = config_class_for(path, CONFIGS)
    cfg = load_config(cls, path)
    assert dataclasses.is_dataclass(cfg)
    for f in dataclasses.fields(cls):
        assert f.metadata.get("help"), f"{cls.__name__}.{f.name} has no help text"
