"""Will a training config fit its GPUs? tomrl plan --config FILE [key=value ...] [--accelerate FILE] [--gpus N] [--gpu NAME].

    tomrl plan --config configs/train/paper_a_qwen2.5-0.5b.yaml --gpu a100-80gb
    tomrl plan --config configs/train/paper_a_qwen2.5-7b.yaml --accelerate configs/accelerate/deepspeed_zero3_offload.yaml --gpu a100-80gb
    tomrl plan --config configs/train/paper_a_qwen2.5-3b.yaml --gpu-memory 48 micro_batch_size=8

Prints, per GPU, the memory of the weights, gradients, optimizer states, reference model, vLLM's
share, activations and the validation cache, by the phase of a step that holds them; the host
RAM; and an estimated time per step. All are ESTIMATES from the model's dimensions (its
config.json when a local folder or the Hugging Face cache has it, else a built-in table), not
measurements; tomrl.training.plan's docstring gives every formula. Exit status 0: it fits;
1: it does not (the smallest change that would, re-planned, is printed); 2: a bad argument or key.
"""

from __future__ import annotations

import argparse
import shlex


def register(parser: argparse.ArgumentParser) -> None:
    from tomrl.training.plan import DEFAULT_CARD, GPU_CARDS

    parser.add_argument("--config", help="YAML file with TrainConfig keys (configs/train/*.yaml)")
    parser.add_argument("--accelerate", metavar="FILE", help="the accelerate config of the launch (configs/accelerate/*.yaml); none = one process")
    parser.add_argument("--gpus", type=int, help="GPUs (processes); default: the accelerate config's num_processes, or 1")
    parser.add_argument("--gpu", choices=sorted(GPU_CARDS), help=f"the card (its memory, compute and bandwidth); default {DEFAULT_CARD}")
    parser.add_argument("--gpu-memory", type=float, metavar="GIB", help="memory per GPU in GiB (replaces the card's)")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="override config keys, as for tomrl train")


def run(args: argparse.Namespace) -> int:
    from tomrl.config import ConfigError, load_config
    from tomrl.training.accelerate_config import AccelerateConfig
    from tomrl.training.config import TrainConfig
    from tomrl.training.plan import format_plan, gpu_card, launch_command, plan

    if not args.config and not args.overrides:
        raise ConfigError("give --config FILE (see configs/train/) and/or key=value overrides")
    cfg = load_config(TrainConfig, args.config, args.overrides)
    accelerate_cfg = load_config(AccelerateConfig, args.accelerate) if args.accelerate else None
    card = gpu_card(args.gpu, args.gpu_memory)
    result = plan(cfg, accelerate_cfg, args.gpus, card=card, accelerate_file=args.accelerate)
    print(format_plan(result))
    processes = accelerate_cfg.num_processes if accelerate_cfg is not None else None
    if result.fits:
        print(f"launch: {launch_command(args.config, args.overrides, args.accelerate, result.gpus, processes)}")
        return 0
    suggestion = result.suggestion
    if suggestion is not None:
        changed = {item.split("=", 1)[0] for item in suggestion.overrides}
        overrides = [item for item in args.overrides if item.split("=", 1)[0].strip() not in changed] + list(suggestion.overrides)
        card_args = (["--gpu", args.gpu] if args.gpu else []) + (["--gpu-memory", f"{args.gpu_memory:g}"] if args.gpu_memory is not None else [])
        check = ["tomrl", "plan", "--config", args.config or "FILE"]
        if suggestion.accelerate_file:
            check += ["--accelerate", suggestion.accelerate_file]
        check += ["--gpus", str(suggestion.gpus), *card_args, *overrides]
        print(f"check it:  {shlex.join(check)}")
        chosen_processes = processes if suggestion.accelerate_file == args.accelerate else _file_processes(suggestion.accelerate_file)
        print(f"launch it: {launch_command(args.config, overrides, suggestion.accelerate_file, suggestion.gpus, chosen_processes)}")
    return 1


def _file_processes(path: str | None) -> int | None:
    if path is None:
        return None
    from tomrl.config import load_config
    from tomrl.training.accelerate_config import AccelerateConfig
    from tomrl.training.plan import ACCELERATE_DIR

    candidate = ACCELERATE_DIR.parents[1] / path
    return load_config(AccelerateConfig, candidate if candidate.exists() else path).num_processes
