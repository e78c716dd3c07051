"""Configs: YAML + key=value overrides onto frozen dataclasses; unknown keys and bad types fail clearly."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import pytest

from tomrl.config import ConfigError, describe, help_of, load_config, parse_overrides, setting


@dataclass(frozen=True)
class LoraPart:
    enabled: bool = setting(False, help="use LoRA adapters")
    rank: int = setting(16, help="adapter rank")


@dataclass(frozen=True)
class ExampleConfig:
    name: str = setting("run", help="run name")
    steps: int = setting(10, help="number of steps")
    lr: float = setting(1e-6, help="learning rate")
    algorithm: Literal["grpo", "reinforce_pp"] = setting("grpo", help="RL algorithm")
    orders: list[int] = setting(default_factory=lambda: [0, 1], help="orders to use")
    lora: LoraPart = setting(default_factory=LoraPart, help="LoRA settings")

    def __post_init__(self):
        if self.steps <= 0:
            raise ValueError(f"steps must be > 0, got {self.steps}")


def write(tmp_path, text):
    path = tmp_path / "cfg.yaml"
    path.write_text(text)
    return path


def test_defaults_file_and_overrides(tmp_path):
    path = write(tmp_path, "name: a\nsteps: 5\nlora:\n  rank: 4\n")
    cfg = load_config(ExampleConfig, path, ["steps=7", "lora.enabled=true", "orders=[2, 3]", "lr=3e-4"])
    assert cfg.name == "a" and cfg.steps == 7 and cfg.lr == pytest.approx(3e-4)
    assert cfg.lora == LoraPart(enabled=True, rank=4)
    assert cfg.orders == [2, 3]
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.steps = 3  # type: ignore[misc]


def test_unknown_key_in_file_names_key_and_file(tmp_path):
    path = write(tmp_path, "name: a\nstpes: 5\n")
    with pytest.raises(ConfigError) as err:
        load_config(ExampleConfig, path)
    assert "stpes" in str(err.value) and str(path) in str(err.value) and "steps" in str(err.value)


def test_unknown_nested_key_and_override(tmp_path):
    path = write(tmp_path, "lora:\n  rnak: 4\n")
    with pytest.raises(ConfigError, match=r"lora\.rnak"):
        load_config(ExampleConfig, path)
    with pytest.raises(ConfigError, match="bogus"):
        load_config(ExampleConfig, None, ["bogus=1"])


def test_wrong_type_and_literal_and_post_init(tmp_path):
    with pytest.raises(ConfigError, match="steps"):
        load_config(ExampleConfig, None, ["steps=many"])
    with pytest.raises(ConfigError, match="algorithm"):
        load_config(ExampleConfig, None, ["algorithm=ppo"])
    with pytest.raises(ConfigError, match="steps must be > 0"):
        load_config(ExampleConfig, write(tmp_path, "steps: 0\n"))


def test_bad_yaml_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(ExampleConfig, write(tmp_path, "name: [unclosed\n"))
    with pytest.raises(ConfigError, match="not found"):
        load_config(ExampleConfig, tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="key=value"):
        parse_overrides(["steps"])


def test_every_field_has_help():
    rows = describe(ExampleConfig)
    assert {row[0] for row in rows} == {"name", "steps", "lr", "algorithm", "orders", "lora.enabled", "lora.rank"}
    assert all(row[3] for row in rows)
    assert help_of(ExampleConfig, "steps") == "number of steps"
