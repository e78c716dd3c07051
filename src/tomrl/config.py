"""Typed, frozen configs: YAML files plus ``key=value`` overrides mapped onto dataclasses.

Every tomrl config is a frozen dataclass whose fields are declared with :func:`setting`, which
carries the field's help text once; ``tomrl … --help`` and the docs read it from there.

    cfg = load_config(TrainConfig, "configs/train/smoke_cpu.yaml", ["max_steps=3", "lora.rank=8"])

Rules: an unknown key (in the file or in an override) is an error naming the key and the file;
values are validated against the field types (``Literal`` options included) by pydantic; a
dataclass's ``__post_init__`` may reject impossible combinations by raising ``ValueError``,
which is reported with the file it came from. Nothing is silently ignored.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import types
import typing
from pathlib import Path
from typing import Any, Iterable, TypeVar

import yaml

from tomrl.io import BadInputError, atomic_write_text, open_input, redact_secrets

T = TypeVar("T")
# A config is a few kilobytes (the largest shipped is 4 KB): a bigger input (/dev/zero, a data file) is not read whole.
MAX_CONFIG_BYTES = 16 * 2**20


class ConfigError(ValueError):
    """A config file or override that cannot be turned into a valid config."""


def setting(default: Any = dataclasses.MISSING, *, help: str, default_factory: Any = dataclasses.MISSING) -> Any:
    """Declare a config field with its help text (the only place the text is written)."""
    if default is not dataclasses.MISSING and default_factory is not dataclasses.MISSING:
        raise TypeError("give default or default_factory, not both")
    return dataclasses.field(default=default, default_factory=default_factory, metadata={"help": help})


def help_of(cls: type, name: str) -> str:
    """The help text of field ``name`` of config class ``cls``."""
    for f in dataclasses.fields(cls):
        if f.name == name:
            return f.metadata.get("help", "")
    raise KeyError(name)


def _nested_dataclass(tp: Any) -> type | None:
    """The dataclass type inside ``tp`` (``X`` or ``X | None``), or None."""
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return tp
    if typing.get_origin(tp) not in (typing.Union, types.UnionType):
        return None  # list[X] / dict[str, X] are not one nested mapping (see _list_item_dataclass)
    for arg in typing.get_args(tp):
        if dataclasses.is_dataclass(arg) and isinstance(arg, type):
            return arg
    return None


def _list_item_dataclass(tp: Any) -> type | None:
    """The dataclass ``X`` of a ``list[X]`` field (or ``list[X] | None``), or None."""
    candidates = typing.get_args(tp) if typing.get_origin(tp) in (typing.Union, types.UnionType) else (tp,)
    for candidate in candidates:
        if typing.get_origin(candidate) is list:
            (item,) = typing.get_args(candidate) or (None,)
            if dataclasses.is_dataclass(item) and isinstance(item, type):
                return item
    return None


def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _check_unknown_keys(cls: type, data: dict, source: str, prefix: str = "") -> None:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: '{prefix.rstrip('.') or '<top level>'}' must be a mapping, got {type(data).__name__}")
    known = {f.name for f in dataclasses.fields(cls)}
    types = _field_types(cls)
    for key, value in data.items():
        if key not in known:
            suggestion = getattr(cls, "moved_keys", {}).get(key) or _closest(key, known)  # moved_keys: old key -> its new place
            hint = f" (did you mean '{prefix}{suggestion}'?)" if suggestion else ""
            raise ConfigError(f"{source}: unknown key '{prefix}{key}' for {cls.__name__}{hint}")
        sub = _nested_dataclass(types[key])
        if sub is not None and value is not None:
            _check_unknown_keys(sub, value, source, prefix=f"{prefix}{key}.")
        item = _list_item_dataclass(types[key])
        if item is not None and isinstance(value, list):
            for index, element in enumerate(value):
                _check_unknown_keys(item, element, source, prefix=f"{prefix}{key}[{index}].")


def _closest(key: str, known: Iterable[str]) -> str | None:
    import difflib

    matches = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    return matches[0] if matches else None


def parse_overrides(overrides: Iterable[str]) -> dict:
    """Turn ``["a.b=1", "c=[x, y]"]`` into ``{"a": {"b": 1}, "c": ["x", "y"]}`` (values parsed as YAML)."""
    result: dict = {}
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override '{item}' is not of the form key=value")
        key, raw = item.split("=", 1)
        key = key.strip()
        if not key:
            raise ConfigError(f"override '{item}' has an empty key")
        try:
            value = yaml_safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError as err:
            raise ConfigError(f"override '{item}': value is not valid YAML: {err}") from None
        node = result
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override '{item}' conflicts with an earlier override of '{part}'")
        node[parts[-1]] = value
    return result


def _deep_merge(base: dict, update: dict) -> dict:
    merged = dict(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml's SafeLoader, except that a mapping giving one key twice is an error (not last-wins)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, typing.Hashable) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (the first value would be silently lost)", key_node.start_mark
                )
            seen.add(key) if isinstance(key, typing.Hashable) else None
        return super().construct_mapping(node, deep=deep)


def yaml_safe_load(text: str) -> Any:
    """``yaml.safe_load`` that refuses duplicate keys (raises ``yaml.YAMLError``)."""
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except RecursionError:
        raise yaml.YAMLError("nested too deeply") from None


def read_yaml(path: str | Path) -> dict:
    """The mapping of a YAML config file ({} for an empty one). Opened with :func:`tomrl.io.open_input`: an empty
    path, a folder or a FIFO that nobody writes to is one error, not the working folder or a wait without end."""
    try:
        with open_input(path, "a YAML config") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except BadInputError as err:
        raise ConfigError(str(err)) from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: over {MAX_CONFIG_BYTES // 2**20} MB, too large for a YAML config")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text ({err})") from None
    try:
        data = yaml_safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: invalid YAML: {err}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping of keys to values")
    return data


def config_from_dict(cls: type[T], data: dict, source: str = "<dict>") -> T:
    """Validate ``data`` against config class ``cls``; errors name the key and ``source``."""
    import pydantic

    _check_unknown_keys(cls, data, source)
    try:
        cfg = pydantic.TypeAdapter(cls).validate_python(data)
    except pydantic.ValidationError as err:
        problems = []
        for e in err.errors():
            loc = ".".join(str(p) for p in e["loc"]) or "<top level>"
            # A block's own check (__post_init__) names what is wrong; its input is the whole block, too long to repeat.
            got = "" if e["type"] == "value_error" and isinstance(e.get("input"), dict) else f" (got {redact_secrets(e.get('input'))!r})"
            problems.append(f"{source}: key '{loc}': {e['msg']}{got}")
        raise ConfigError("\n".join(problems)) from None
    except (ValueError, TypeError) as err:
        raise ConfigError(redact_secrets(f"{source}: {err}")) from None
    _check_numbers(cfg, source)
    return cfg


# Seeds go to numpy, torch and Python's random; numpy takes 0 <= seed < 2**32.
SEED_RANGE = (0, 2**32 - 1)


def check_seed(value: int, name: str) -> int:
    """``value`` if it is a seed numpy (and so sklearn) accepts, else a :class:`ConfigError` naming ``name``
    (a flag such as ``--seed``, or ``FILE: key 'seed'``): the one range check of every seed option."""
    low, high = SEED_RANGE
    if not low <= value <= high:
        raise ConfigError(f"{name}: a seed must be between {low} and {high}, got {value}")
    return value


def _check_numbers(cfg: Any, source: str, prefix: str = "") -> None:
    """Rules every config shares: no NaN or infinite float (they pass type and range checks, since
    every comparison with NaN is false), and seeds (``seed``, ``*_seed``) in numpy's range."""
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        key = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            _check_numbers(value, source, f"{key}.")
            continue
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if dataclasses.is_dataclass(item) and not isinstance(item, type):
                _check_numbers(item, source, f"{key}[].")
            elif isinstance(item, float) and not math.isfinite(item):
                raise ConfigError(f"{source}: key '{key}': must be a finite number, got {item}")
            elif (f.name == "seed" or f.name.endswith("_seed")) and isinstance(item, int) and not isinstance(item, bool):
                check_seed(item, f"{source}: key '{key}'")


def load_config(cls: type[T], path: str | Path | None = None, overrides: Iterable[str] = ()) -> T:
    """Load ``cls`` from an optional YAML file, then apply ``key=value`` overrides."""
    overrides = list(overrides)
    data = read_yaml(path) if path is not None else {}
    source = str(path) if path is not None else "<defaults>"
    if overrides:
        data = _deep_merge(data, parse_overrides(overrides))
        source = f"{source} + command-line overrides"
    return config_from_dict(cls, data, source)


def config_to_dict(cfg: Any) -> dict:
    return dataclasses.asdict(cfg)


def save_config(cfg: Any, path: str | Path) -> None:
    atomic_write_text(path, yaml.safe_dump(redact_secrets(config_to_dict(cfg)), sort_keys=False))


def describe(cls: type, prefix: str = "") -> list[tuple[str, str, str, str]]:
    """Rows ``(key, type, default, help)`` for every field, nested fields as dotted keys."""
    rows = []
    types = _field_types(cls)
    for f in dataclasses.fields(cls):
        tp = types[f.name]
        sub = _nested_dataclass(tp)
        if sub is not None:
            rows.extend(describe(sub, prefix=f"{prefix}{f.name}."))
            continue
        if f.default is not dataclasses.MISSING:
            default = repr(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            default = repr(f.default_factory())
        else:
            default = "(required)"
        type_name = tp.__name__ if isinstance(tp, type) else str(tp).replace("typing.", "")
        rows.append((prefix + f.name, type_name, default, f.metadata.get("help", "")))
    return rows


def describe_text(cls: type) -> str:
    """``describe`` as plain text for ``--help`` epilogs."""
    lines = [f"{cls.__name__} keys (set in the YAML file or as key=value):"]
    for key, type_name, default, help_text in describe(cls):
        lines.append(f"  {key} [{type_name}] = {default}\n      {help_text}")
    return "\n".join(lines)


# Which config class each folder under configs/ holds; the test that loads every shipped YAML
# uses this map, so a new folder without an entry fails that test.
CONFIG_KINDS: dict[str, str] = {
    "train": "tomrl.training.config:TrainConfig",
    "accelerate": "tomrl.training.accelerate_config:AccelerateConfig",
    "eval": "tomrl.evaluation.config:EvalConfig",
    "generate": "tomrl.generators.config:GenerateConfig",
    "recipes": "tomrl.loaders.recipes:Recipe",
    "demo": "tomrl.demo:DemoConfig",
    "study": "tomrl.study.config:StudyConfig",
}


def config_class_for(path: str | Path, configs_root: str | Path) -> type:
    """The config class of a YAML file under ``configs_root`` (by its first folder)."""
    rel = Path(path).resolve().relative_to(Path(configs_root).resolve())
    kind = rel.parts[0] if len(rel.parts) > 1 else ""
    if kind not in CONFIG_KINDS:
        raise ConfigError(f"{path}: no config class is registered for folder '{kind}' (see tomrl.config.CONFIG_KINDS)")
    module_name, class_name = CONFIG_KINDS[kind].split(":")
    return getattr(importlib.import_module(module_name), class_name)
