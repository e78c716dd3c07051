"""Export data and reward adapter for veRL: tomrl export verl --config FILE --out DIR.

    tomrl export verl --config configs/train/paper_a_qwen2.5-0.5b.yaml --out verl_data
    tomrl export verl --config configs/train/paper_b_qwen2.5-7b.yaml --out verl_b --prompt-format rendered
    N_GPUS=1 bash verl_data/run_verl.sh # on a machine with veRL and GPUs (the folder can be copied there)

Writes, from the training config's data (the same examples, prompts and reward as ``tomrl train``):

- ``train.parquet`` and ``validation.parquet`` with veRL's columns: ``data_source`` (the
  example's source), ``prompt`` (chat messages), ``ability`` ("theory_of_mind"),
  ``reward_model`` ({style: "rule", ground_truth: gold answer}), ``extra_info`` ({split, index,
  id, order, question_type, story, question, source, reward, prefill});
- ``run_verl.sh``: the ``python3 -m verl.trainer.main_ppo`` command (veRL 0.9.1; 0.7.1 or later)
  with the config's settings (Paper A: GRPO, 8 prompts × 16 rollouts, lr 5e-7, KL loss 0.001
  low-variance, entropy 0.001, clip 0.2, 1,024 / 2,048 tokens, temperature 1.0, 2 epochs; Paper B:
  REINFORCE++ with the KL in the reward, 8 × 8, temperature 0.6, 10 epochs), Paper A's vLLM
  tensor parallelism (1) and FSDP CPU offload, and ``reward.custom_reward_function`` loading
  :mod:`tomrl.training.verl_reward` from the installed tomrl (``pkg://``). Data paths are relative to
  the script, so the folder can be moved. veRL runs in its own environment, with tomrl added by
  ``pip install --no-deps`` (the adapter needs only pydantic and PyYAML besides tomrl);
- ``data/train.jsonl`` and ``data/validation.jsonl``: the same examples in tomrl's schema.

Prompt formats. ``messages`` (default, upstream veRL): system + user messages; veRL applies the
model's chat template. veRL cannot prefill the assistant turn, so the model writes its own
``<think>`` and the rows say ``prefill: ""`` (Paper A's four-tag rule then asks for the four
tags in the response itself). ``rendered`` (the veRL fork ToM-RL trained with, Logic-RL style):
one user message whose content is the full chat-template text ending with the prefill
(``…<|im_start|>assistant\\n<think>``), exactly as in ToM-RL's released parquet files; the
rows then say ``prefill: "<think>"``. It needs the model's tokenizer (``--tokenizer``).
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from tomrl.config import ConfigError, describe_text, load_config
from tomrl.outputs import check_folder, check_outputs, mark_folder
from tomrl.training.algorithms import ALGORITHMS

ABILITY = "theory_of_mind"


def register(parser: argparse.ArgumentParser) -> None:
    from tomrl.training.config import TrainConfig

    parser.add_argument("--config", required=True, help="training config (configs/train/*.yaml)")
    parser.add_argument("--out", required=True, help="output folder for the parquet files and run_verl.sh")
    parser.add_argument("--prompt-format", choices=["messages", "rendered"], default="messages",
                        help="messages: upstream veRL applies the chat template; rendered: ToM-RL's fork (full text + prefill)")
    parser.add_argument("--tokenizer", help="tokenizer for --prompt-format rendered (default: the config's model)")
    parser.add_argument("--gpus", type=int, default=4, help="default GPU count of run_verl.sh; N_GPUS=K at launch overrides it (Paper A: 4 x A100 80 GB)")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="override TrainConfig keys")
    parser.epilog = describe_text(TrainConfig)


def run(args: argparse.Namespace) -> int:
    from tomrl.training.config import TrainConfig

    cfg = load_config(TrainConfig, args.config, args.overrides)
    out = check_folder(args.out, "export-verl", key="--out")  # never a train run, an eval, a demo …
    check_outputs({"--out": out}, inputs={"--config": args.config, "data.train_files": cfg.data.train_files,
                                          "data.validation_files": cfg.data.validation_files})
    written = export_verl(cfg, args.out, prompt_format=args.prompt_format, tokenizer=args.tokenizer, gpus=args.gpus)
    for name, count in written.items():
        print(f"{name}: {count} rows" if isinstance(count, int) else f"{name}: {count}")
    print(f"launch: bash {Path(args.out) / 'run_verl.sh'}")
    return 0


def export_verl(cfg, out_dir: str | Path, prompt_format: str = "messages", tokenizer: str | None = None, gpus: int = 4) -> dict[str, Any]:
    """Write the parquet files, the JSONL copies and run_verl.sh for ``cfg`` into ``out_dir``."""
    from tomrl.prompts import build_messages, render_prompt
    from tomrl.training.data import prepare_data

    out = Path(out_dir)
    mark_folder(out, "export-verl")
    train, validation = prepare_data(cfg, out)
    if prompt_format == "rendered":
        from tomrl.models import load_tokenizer

        tok = load_tokenizer(tokenizer or cfg.model)
        prefill = cfg.prompt.resolved_prefill

        def prompt_of(example):
            return [{"role": "user", "content": render_prompt(example, tok, cfg.prompt)}]
    elif prompt_format == "messages":
        prefill = ""

        def prompt_of(example):
            return build_messages(example, cfg.prompt.style)
    else:
        raise ConfigError(f"unknown prompt format {prompt_format!r}: messages or rendered")
    reward = cfg.rewards[0]
    if len(cfg.rewards) > 1 or cfg.reward_options:
        raise ConfigError("veRL calls one compute_score per response: give a single reward in the config's rewards, without reward_options")
    if ALGORITHMS[cfg.algorithm].verl_estimator is None:
        raise ConfigError(f"algorithm {cfg.algorithm!r} has no veRL estimator to export to (register_algorithm's verl_estimator)")
    written: dict[str, Any] = {}
    for split, examples in (("train", train), ("validation", validation)):
        if not examples:
            continue
        rows = [verl_row(e, index, split, prompt_of(e), reward, prefill) for index, e in enumerate(examples)]
        write_parquet(rows, out / f"{split}.parquet")
        written[f"{split}.parquet"] = len(rows)
    script = launch_command(cfg, gpus, has_validation=bool(validation))
    from tomrl.io import atomic_write_text

    atomic_write_text(out / "run_verl.sh", script)
    (out / "run_verl.sh").chmod(0o755)
    written["run_verl.sh"] = "written"
    return written


def verl_row(example, index: int, split: str, prompt: list[dict], reward: str, prefill: str) -> dict:
    """One veRL row (the column names veRL's RLHFDataset and reward managers read)."""
    return {
        "data_source": example.source,
        "prompt": prompt,
        "ability": ABILITY,
        "reward_model": {"style": "rule", "ground_truth": example.answer},
        "extra_info": {
            "split": split,
            "index": index,
            "id": example.id,
            "order": example.order,
            "question_type": example.question_type,
            "story": example.story,
            "question": example.question,
            "source": example.source,
            "reward": reward,
            "prefill": prefill,
        },
    }


def write_parquet(rows: list[dict], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tomrl.io import atomic_open

    table = pa.Table.from_pylist(rows)
    with atomic_open(path, "wb") as handle:
        pq.write_table(table, handle)


# The veRL release whose config keys (tests/data/verl_ppo_trainer_keys.txt) and defaults the script
# is written against; reward.custom_reward_function and its pkg:// paths need veRL 0.7.1 or later.
VERL_VERSION = "0.9.1"
# vLLM tensor parallelism of the rollouts. veRL's default is 2, and veRL asserts that it divides the
# GPU count, so one GPU fails at start. Every model tomrl trains fits one GPU for generation, so each
# GPU holds a whole copy (1 divides any GPU count), as Paper A's tom_grpo.sh sets.
ROLLOUT_TENSOR_PARALLEL = 1
# Paper A's tom_grpo.sh offloads the actor's parameters, gradients and optimizer state and the
# reference model's parameters to CPU, for every size it trained (0.5B to 7B, 4 x A100 80 GB). A full
# 7B fine-tune needs it: its fp32 weights, gradients and Adam state (about 120 GB, 30 GB a GPU on
# four) do not fit beside vLLM's 60 % otherwise. veRL has since dropped grad_offload. Smaller models
# run faster with OFFLOAD=False in the environment.
PAPER_A_OFFLOAD = True


def launch_command(cfg, gpus: int, has_validation: bool) -> str:
    """run_verl.sh: veRL's main_ppo with the config's hyper-parameters (see the module docstring).

    Paths are relative to the script's own folder ($HERE) and the reward is loaded from the installed
    tomrl package (pkg://), so the export folder can be copied to the GPU machine as it is.
    """
    if gpus < 1:
        raise ConfigError(f"--gpus must be >= 1, got {gpus}")
    prompts, rollouts = cfg.prompts_per_step, cfg.rollouts_per_prompt
    micro = max(1, cfg.micro_batch_size)
    kl_in_reward = cfg.puts_kl_in_reward
    val = "validation.parquet" if has_validation else "train.parquet"  # veRL loads a validation set even when it never validates
    epochs = max(1, round(cfg.epochs))
    # tomrl validates every eval.every_steps steps (0 = never) and, with eval.at_start, before the first;
    # veRL validates when test_freq > 0 (and at the last step), and before training unless val_before_train=False.
    validates = has_validation and cfg.eval.every_steps > 0
    settings = [
        f"algorithm.adv_estimator={ALGORITHMS[cfg.algorithm].verl_estimator}",
        "data.train_files=$HERE/train.parquet",
        f"data.val_files=$HERE/{val}",
        f"data.train_batch_size={prompts}",
        f"data.max_prompt_length={cfg.max_prompt_length}",
        f"data.max_response_length={cfg.max_completion_length}",
        "data.filter_overlong_prompts=True",
        f"actor_rollout_ref.model.path={_model_path(cfg.model)}",
        f"actor_rollout_ref.actor.optim.lr={cfg.learning_rate}",
        f"actor_rollout_ref.actor.optim.weight_decay={cfg.weight_decay}",
        # veRL counts the mini-batch in prompts; one update per step as in the papers' runs.
        f"actor_rollout_ref.actor.ppo_mini_batch_size={prompts}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={micro}",
        f"actor_rollout_ref.actor.ppo_epochs={cfg.num_iterations}",
        f"actor_rollout_ref.actor.clip_ratio={cfg.clip_epsilon}",
        f"actor_rollout_ref.actor.entropy_coeff={cfg.entropy_coef}",
        f"actor_rollout_ref.actor.grad_clip={cfg.max_grad_norm}",
        f"actor_rollout_ref.actor.use_kl_loss={not kl_in_reward and cfg.kl_coef > 0}",
        f"actor_rollout_ref.actor.kl_loss_coef={cfg.kl_coef}",
        "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
        "actor_rollout_ref.actor.fsdp_config.param_offload=$OFFLOAD",
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload=$OFFLOAD",
        "actor_rollout_ref.ref.fsdp_config.param_offload=$OFFLOAD",
        "actor_rollout_ref.model.enable_gradient_checkpointing=True",  # as ToM-RL's tom_grpo.sh
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=$ROLLOUT_TP",
        f"actor_rollout_ref.rollout.n={rollouts}",
        f"actor_rollout_ref.rollout.temperature={cfg.temperature}",
        f"actor_rollout_ref.rollout.top_p={cfg.top_p}",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={micro}",
        f"actor_rollout_ref.rollout.val_kwargs.temperature={cfg.eval.temperature}",
        f"actor_rollout_ref.rollout.val_kwargs.top_p={cfg.eval.top_p}",
        f"actor_rollout_ref.rollout.val_kwargs.do_sample={cfg.eval.temperature > 0}",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={micro}",
        f"algorithm.use_kl_in_reward={kl_in_reward}",
        f"algorithm.kl_ctrl.kl_coef={cfg.kl_coef}",
        f"algorithm.gamma={cfg.gamma}",
        "reward.custom_reward_function.path=pkg://tomrl.training.verl_reward",
        "reward.custom_reward_function.name=compute_score",
        "trainer.critic_warmup=0",
        "trainer.logger=[console]",
        "trainer.project_name=tomrl",
        f"trainer.experiment_name={Path(cfg.run_dir).name}",
        "trainer.n_gpus_per_node=$N_GPUS",
        "trainer.nnodes=1",
        f"trainer.save_freq={cfg.save_every}",
        f"trainer.test_freq={cfg.eval.every_steps if validates else -1}",
        f"trainer.val_before_train={validates and cfg.eval.at_start}",
        f"trainer.total_epochs={epochs}",
    ]
    if cfg.max_steps > 0:
        settings.append(f"trainer.total_training_steps={cfg.max_steps}")
    if cfg.lora.enabled:
        settings += [f"actor_rollout_ref.model.lora_rank={cfg.lora.rank}", f"actor_rollout_ref.model.lora_alpha={cfg.lora.alpha}",
                     "actor_rollout_ref.model.target_modules=all-linear"]
    lines = "\n".join(f"    {_shell_word(s)} \\" for s in settings)
    return (
        "#!/bin/bash\n"
        f"# veRL launch written by `tomrl export verl` from {cfg.run_dir} ({cfg.algorithm}, {cfg.model}), for veRL {VERL_VERSION}.\n"
        "#\n"
        "# Install veRL in an environment of its own: its pins (transformers < 5.11, vLLM's torch) and tomrl's\n"
        "# (transformers 5.23) cannot share one. The reward adapter (tomrl.training.verl_reward) needs only\n"
        "# tomrl's reward code, pydantic and PyYAML, which veRL already brings, so add tomrl without its dependencies:\n"
        f"#   pip install 'verl[vllm]=={VERL_VERSION}'\n"
        "#   pip install --no-deps /path/to/tomrl          # a checkout or wheel of tomrl\n"
        "#\n"
        "# The reward is tomrl's (reward.custom_reward_function): the same one `tomrl train` optimises.\n"
        "# The data paths are relative to this script, so this folder can be copied to the GPU machine as it is.\n"
        "#   N_GPUS=1 bash run_verl.sh trainer.save_freq=100     # GPUs on this node; more key=value arguments go to veRL\n"
        "set -euo pipefail\n"
        'HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"\n'
        f"N_GPUS=${{N_GPUS:-{gpus}}}\n"
        "# vLLM tensor parallelism: each GPU generates with a whole copy of the model (it must divide N_GPUS).\n"
        f"ROLLOUT_TP=${{ROLLOUT_TP:-{ROLLOUT_TENSOR_PARALLEL}}}\n"
        "# FSDP CPU offload of the actor's parameters and optimizer state and of the reference model, as Paper A.\n"
        f"OFFLOAD=${{OFFLOAD:-{PAPER_A_OFFLOAD}}}\n"
        'if (( N_GPUS % ROLLOUT_TP != 0 )); then\n'
        '    echo "ROLLOUT_TP=$ROLLOUT_TP does not divide N_GPUS=$N_GPUS" >&2\n'
        "    exit 2\n"
        "fi\n"
        "python3 -m verl.trainer.main_ppo \\\n"
        f"{lines}\n"
        '    "$@"\n'
    )


def _shell_word(setting: str) -> str:
    """One override as a shell word: quoted as is, or in double quotes where it names a script variable ($HERE, $N_GPUS)."""
    if "$" not in setting:
        return shlex.quote(setting)
    if any(c in setting for c in '"\\`'):
        raise ConfigError(f"cannot write {setting!r} into run_verl.sh")
    return f'"{setting}"'


def _model_path(name: str) -> str:
    """Embedded names (smollm2-135m, tiny-qwen2) become their local folders; hub ids stay as they are."""
    from tomrl.models import EMBEDDED_MODELS, TINY_MODEL, resolve_model

    return resolve_model(name) if name in EMBEDDED_MODELS or name == TINY_MODEL else name
