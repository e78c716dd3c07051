"""``tomrl demo``: the whole pipeline on the embedded model, with progress shown throughout.

    tomrl demo                      # defaults from configs/demo/default.yaml's values
    tomrl demo --config configs/demo/default.yaml out_dir=runs/demo

Today it prepares the embedded model and checks that it loads and generates; later stages
(data generation, audit, baseline evaluation, training, report) join as they are built.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from tomrl.config import describe_text, load_config, setting


@dataclass(frozen=True)
class DemoConfig:
    model: str = setting("smollm2-135m", help="model to run the demo on: an embedded name, hub id or local path")
    out_dir: str = setting("runs/demo", help="folder for the demo's data, runs and report")
    seed: int = setting(0, help="seed for data generation, sampling and training")


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="YAML file with DemoConfig keys")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="override config keys")
    parser.epilog = describe_text(DemoConfig)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from tomrl.models import EMBEDDED_MODELS, prepare, verify_model

    cfg = load_config(DemoConfig, args.config, args.overrides)
    console = Console()
    console.rule("[bold]tomrl demo")
    console.print(f"step 1/1: prepare model {cfg.model}")
    if cfg.model in EMBEDDED_MODELS:
        path = prepare(cfg.model)
    else:
        path = cfg.model
    result = verify_model(path)
    console.print(f"model ready at {path}; it answered {result['prompt']!r} with {result['generated']!r}")
    console.print("Data generation, evaluation, training and the report join the demo as their issues land.")
    return 0
