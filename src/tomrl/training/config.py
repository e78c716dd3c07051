"""The typed config of ``tomrl train``: algorithm, data, rewards, rollouts, logging, checkpoints.

    from tomrl.config import load_config
    from tomrl.training.config import TrainConfig
    cfg = load_config(TrainConfig, "configs/train/smoke_cpu.yaml", ["algorithm=reinforce_pp", "max_steps=2"])

On the command line: ``tomrl train --config configs/train/smoke_cpu.yaml algorithm=reinforce_pp max_steps=2``
(``tomrl train --help`` lists every key with its help text, which is written once, below).

Batch arithmetic, as in veRL: one optimizer step consumes ``prompts_per_step`` prompts with
``rollouts_per_prompt`` completions each; they are processed ``micro_batch_size`` completions per
forward/backward pass (per process) and accumulated into that one step. Paper A: 8 × 16 = 128
completions per step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator

from tomrl.config import ConfigError, setting
from tomrl.models import generation_length_problem
from tomrl.prompts import PromptConfig
from tomrl.rewards.functions import make_reward, registered_reward, reward_options_help, rewards_help
from tomrl.training.algorithms import ALGORITHMS, algorithms_help, registered_algorithm

LossType = Literal["grpo", "dr_grpo", "dapo", "bnpo"]
KLEstimator = Literal["k1", "k2", "k3"]
RolloutEngine = Literal["auto", "slots", "transformers"]


@dataclass(frozen=True)
class DataConfig:
    train_files: list[str] = setting(
        default_factory=list,
        help="unified-schema JSONL files to train on (one data source: these, a recipe, or the generator)",
    )
    validation_files: list[str] = setting(
        default_factory=list, help="unified-schema JSONL files of the held-out validation set (evaluated every eval.every_steps)"
    )
    recipe: str | None = setting(
        None,
        help="name or file of a data recipe (configs/recipes, e.g. tomrl-paper): gives the train and validation (dev) "
        "sets; its test sets are for `tomrl eval` after training",
    )
    generate: str | None = setting(
        None,
        help="generate the training data with tomrl's generator: path of a configs/generate YAML file, or 'default' "
        "for the generator's defaults",
    )
    generate_overrides: list[str] = setting(
        default_factory=list, help="key=value overrides applied to the generator config of every stage, e.g. ['n=64']"
    )
    stages: list[list[str]] = setting(
        default_factory=list,
        help="curriculum: one list of generator overrides per stage, trained in this order (e.g. "
        "[['orders=[0, 1]', 'lengths=[1]'], ['orders=[0, 1, 2]']]); empty = one stage",
    )
    validation_overrides: list[str] = setting(
        default_factory=list,
        help="generator overrides of the validation set (its stories are never those of the training set)",
    )
    max_train_examples: int | None = setting(None, help="use at most this many training examples (the first ones); null = all")
    max_validation_examples: int | None = setting(None, help="use at most this many validation examples; null = all")
    shuffle: bool = setting(True, help="shuffle the training examples (within each curriculum stage) with the run's seed")
    skip_bad: bool = setting(
        False,
        help="skip bad rows of train_files / validation_files (counted; listed with their reasons in RUN_DIR/data/"
        "skipped.json) instead of stopping at the first (also: tomrl train --skip-bad)",
    )

    allow_test_validation: bool = setting(
        False,
        help="allow a validation set that shares stories with a known test set (a benchmark, or a test split of the "
        "recipe): best/ and the validation curve then select on test data. Off: such a config is an error. On: the "
        "overlap is recorded in RUN_DIR/data/split_check.json and summary.json, and every report warns on its first line",
    )

    def __post_init__(self) -> None:
        sources = [bool(self.train_files), self.recipe is not None, self.generate is not None]
        if sum(sources) > 1:
            raise ValueError("data: give one source of training data: train_files, recipe or generate")
        if (self.stages or self.generate_overrides or self.validation_overrides) and self.generate is None:
            raise ValueError("data.stages, data.generate_overrides and data.validation_overrides need data.generate")
        for name in ("max_train_examples", "max_validation_examples"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"data.{name} must be >= 1 or null, got {value}")


@dataclass(frozen=True)
class LoraSettings:
    enabled: bool = setting(False, help="train a LoRA adapter (PEFT) instead of all weights (full fine-tuning is the default)")
    rank: int = setting(16, help="LoRA rank r")
    alpha: int = setting(32, help="LoRA alpha (scaling = alpha / rank)")
    dropout: float = setting(0.05, help="dropout on the LoRA path")
    target_modules: list[str] = setting(
        default_factory=lambda: ["all-linear"], help="modules to adapt; ['all-linear'] = every linear layer but the head"
    )

    def __post_init__(self) -> None:
        if self.rank < 1:
            raise ValueError(f"lora.rank must be >= 1, got {self.rank}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"lora.dropout must be in [0, 1), got {self.dropout}")


@dataclass(frozen=True)
class EvalDuringTraining:
    every_steps: int = setting(10, help="evaluate on the validation set every K optimizer steps and after the last (0 = never)")
    max_examples: int | None = setting(None, help="evaluate on at most this many validation examples (the first ones)")
    temperature: float = setting(0.0, help="sampling temperature of validation answers (0 = greedy)")
    top_p: float = setting(1.0, help="top-p of validation sampling (unused when greedy)")
    max_new_tokens: int = setting(512, help="token budget of each validation answer")
    batch_size: int = setting(16, help="prompts generated together during validation")
    scheme: Literal["strict", "paper", "paper_eval", "paper_b"] = setting(
        "strict", help="answer scheme of validation accuracy (tomrl.rewards.answer); strict = exact match, well-formed"
    )
    keep_best: bool = setting(True, help="keep the checkpoint with the best validation accuracy in RUN_DIR/best (Paper B)")
    at_start: bool = setting(True, help="also evaluate before the first step (the 'before' number)")

    def __post_init__(self) -> None:
        if self.every_steps < 0:
            raise ValueError(f"eval.every_steps must be >= 0, got {self.every_steps}")
        if self.temperature < 0:
            raise ValueError(f"eval.temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"eval.top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1 or self.batch_size < 1:
            raise ValueError("eval.max_new_tokens and eval.batch_size must be >= 1")
        if self.max_examples is not None and self.max_examples < 1:  # 0 would silently turn validation off
            raise ValueError(f"eval.max_examples must be >= 1 or null (turn validation off with eval.every_steps=0), got {self.max_examples}")


@dataclass(frozen=True)
class WarmStartConfig:
    enabled: bool = setting(False, help="before RL, fine-tune on oracle-written reasoning traces of the training stories")
    epochs: float = setting(1.0, help="passes over the traces")
    learning_rate: float = setting(1e-4, help="learning rate of the supervised warm start")
    batch_size: int = setting(8, help="traces per optimizer step")
    max_examples: int | None = setting(None, help="use at most this many traces (the first training examples); null = all")
    max_steps: int | None = setting(
        None, help="stop after this many optimizer updates, cycling over the traces as needed (tomrl study matches budgets with it); null = the epochs"
    )

    def __post_init__(self) -> None:
        if self.epochs <= 0 or self.learning_rate <= 0 or self.batch_size < 1:
            raise ValueError("warm_start.epochs and warm_start.learning_rate must be > 0, warm_start.batch_size >= 1")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"warm_start.max_steps must be >= 1 or null, got {self.max_steps}")


# transformers' reporting integrations (transformers.integrations.integration_utils.INTEGRATION_TO_CALLBACK,
# 5.23; tests/training/test_report_to.py checks this list against it): the one list report_to validates against.
REPORT_TO = ("azure_ml", "clearml", "codecarbon", "comet_ml", "dagshub", "dvclive", "flyte", "kubeflow", "mlflow", "neptune",
             "swanlab", "tensorboard", "trackio", "wandb")


def registered_report_to(name: str) -> str:
    """``name``, if it is a reporting integration (the validator of ``TrainConfig.report_to``)."""
    if name not in REPORT_TO:
        raise ValueError(f"unknown report_to {name!r}; known: {', '.join(REPORT_TO)}")
    return name


@dataclass(frozen=True)
class TrainConfig:
    moved_keys: ClassVar[dict[str, str]] = {"prompt_style": "prompt.style", "prefill": "prompt.prefill"}  # named by the unknown-key error
    model: str = setting("smollm2-135m", help="policy to train: an embedded name (smollm2-135m, tiny-qwen2), hub id or local path")
    run_dir: str = setting("runs/train", help="folder of the run: config, logs, checkpoints, best and final model")
    seed: int = setting(0, help="seed of data order, sampling and initialisation")
    algorithm: Annotated[str, AfterValidator(registered_algorithm)] = setting(
        "grpo", help=f"RL algorithm of tomrl.training.algorithms (register_algorithm adds one): {algorithms_help()}"
    )
    loss_type: LossType = setting(
        "grpo",
        help="how token losses are averaged (TRL): grpo = per sequence then over sequences; bnpo = over the "
        "micro-batch's tokens; dapo = over the step's tokens; dr_grpo = sum / (sequences x max_completion_length)",
    )
    data: DataConfig = setting(default_factory=DataConfig, help="training and validation data")
    prompt: PromptConfig = setting(default_factory=PromptConfig, help="how examples become prompts (tomrl.prompts)")
    rewards: list[Annotated[str, AfterValidator(registered_reward)]] = setting(
        default_factory=lambda: ["paper"],
        help=f"rewards of tomrl.rewards.functions (register_reward adds one), summed with reward_weights: {rewards_help()}",
    )
    reward_options: dict[str, dict[str, Any]] = setting(
        default_factory=dict,
        help="options of rewards that take them, e.g. {fidelity: {timing: final}} or reward_options.fidelity.timing=final; checked at "
        "load against the reward's options (a reward that is not in rewards, an unknown option or a bad value is an error): "
        + "; ".join(reward_options_help().splitlines()),
    )
    reward_weights: list[float] | None = setting(
        None, help="one weight per reward of rewards, in that order (the rollout's reward is the weighted sum); null = all 1"
    )
    prompts_per_step: int = setting(8, help="prompts per optimizer step (Paper A: 8)")
    rollouts_per_prompt: int = setting(16, help="completions sampled per prompt (Paper A: 16, Paper B: 8)")
    micro_batch_size: int = setting(16, help="completions per forward/backward pass per process; gradients are accumulated")
    learning_rate: float = setting(5e-7, help="peak learning rate (Paper A and B: 5e-7)")
    lr_scheduler: Literal["constant", "constant_with_warmup", "linear", "cosine"] = setting(
        "constant", help="learning-rate schedule (Paper A: constant)"
    )
    warmup_ratio: float = setting(0.0, help="fraction of steps spent warming the learning rate up")
    weight_decay: float = setting(0.0, help="AdamW weight decay")
    max_grad_norm: float = setting(1.0, help="gradient clipping norm")
    epochs: float = setting(1.0, help="passes over the training set (Paper A: 2)")
    max_steps: int = setting(-1, help="stop after this many optimizer steps (-1 = run the epochs)")
    max_prompt_length: int = setting(1024, help="prompts longer than this many tokens are dropped (reported), as in veRL")
    max_completion_length: int = setting(2048, help="token budget of each completion (Paper A: 2048)")
    temperature: float = setting(1.0, help="rollout sampling temperature (Paper A: 1.0, Paper B: 0.6)")
    top_p: float = setting(1.0, help="rollout top-p")
    stop_at_answer: bool = setting(
        False,
        help="a speed option for CPU demos and smoke runs: end every rollout and validation answer right after its "
        "first '</answer>' (truncates there, so text after it is never generated, scored or penalised). Off for paper "
        "fidelity: the papers generate to EOS or the length limit and Paper A scores the last answer tag",
    )
    rollout_engine: RolloutEngine = setting(
        "auto",
        help="what samples the rollouts when use_vllm is off: slots = tomrl's continuous-batching decoder "
        "(tomrl.training.rollouts; Llama, Qwen2 and Qwen3 without LoRA, temperature and top_p), transformers = "
        "model.generate; auto = the slot decoder where the architecture supports it and vLLM is off, else "
        "transformers' generate",
    )
    share_prompt_forward: bool = setting(
        True,
        help="score the rollouts of one prompt on a single forward pass of that prompt (its keys and values shared by "
        "the rollouts, gradients included; tomrl.training.shared_prompt) instead of one pass per rollout: the same "
        "loss, with the prompt's compute paid once per group. Used where it applies (one process, no gradient "
        "checkpointing, text only); else TRL's forward",
    )
    kl_coef: float = setting(0.001, help="beta: + beta x KL (k3) per token in the loss, averaged as the policy loss (Paper A: 0.001), or - beta x KL in each token reward")
    kl_estimator: KLEstimator = setting(
        "k1", help="KL estimator of the in-reward KL of REINFORCE++ (OpenRLHF default k1); the loss KL is TRL's k3"
    )
    kl_in_reward: bool | None = setting(None, help="put -beta*KL into the token rewards (true) or into the loss (false); null = the algorithm's place")
    gamma: float = setting(1.0, help="discount of REINFORCE++ returns")
    scale_rewards: Literal["group", "batch", "none"] = setting(
        "group", help="grpo only: divide advantages by the group's std (group), the batch's (batch) or not (none; Dr. GRPO)"
    )
    clip_epsilon: float = setting(0.2, help="PPO clip range (Paper A: 0.2)")
    clip_epsilon_high: float | None = setting(None, help="upper clip range (DAPO's clip-higher); null = clip_epsilon")
    entropy_coef: float = setting(0.0, help="entropy bonus: - entropy_coef x the mean token entropy of the micro-batch in the loss (Paper A: 0.001)")
    num_iterations: int = setting(1, help="optimisation passes over each batch of rollouts (PPO epochs)")
    mask_truncated_completions: bool = setting(False, help="exclude completions cut by max_completion_length from the loss")
    dynamic_sampling: bool = setting(
        False,
        help="DAPO's dynamic sampling: prompt groups whose rollouts all get the same reward (no group-relative signal) "
        "are replaced, before the update, by groups of fresh training prompts (seeded by seed and step); costs extra "
        "generation rounds. Logs dynamic_sampling/dropped_fraction and dynamic_sampling/rounds",
    )
    dynamic_sampling_max_rounds: int = setting(
        3,
        help="dynamic_sampling: at most this many extra generation rounds per step; slots still without signal then "
        "keep their own zero-signal group",
    )
    gradient_checkpointing: bool = setting(False, help="recompute activations in the backward pass (saves GPU memory)")
    deterministic: bool | None = setting(
        None, help="torch's deterministic kernels, so the same seed gives bit-identical weights on one machine; null = on "
        "for CPUs (costs little), off for GPUs (there it also means math attention, whose memory grows with the square "
        "of the sequence length); vLLM rollouts are not bit-reproducible either way"
    )
    precision: Literal["auto", "float32", "bfloat16", "float16"] = setting(
        "auto",
        help="training precision; auto = bfloat16 on GPUs that support it and on CPUs with native bf16 (AVX512-BF16 or "
        "AMX), decided from the CPU's features, never a timing (decision and reason in summary.json); float32 otherwise",
    )
    lora: LoraSettings = setting(default_factory=LoraSettings, help="LoRA (PEFT) options")
    use_vllm: bool = setting(False, help="generate rollouts with vLLM (needs pip install 'tomrl[vllm]' and a CUDA GPU)")
    vllm_mode: Literal["colocate", "server"] = setting("colocate", help="vLLM inside the training process or a trl vllm-serve server")
    vllm_gpu_memory_utilization: float = setting(0.3, help="GPU memory share of colocated vLLM")
    vllm_importance_sampling_correction: bool = setting(
        True,
        help="use_vllm only (ignored otherwise): weight each rollout by the ratio of the trained policy's probability of it "
        "to vLLM's sampling probability (the two compute slightly different log-probabilities) and drop rollouts whose "
        "ratio exceeds 3 (TRL's correction in its default sequence_mask mode; one extra forward pass per step); TRL's "
        "default is on; Paper A's veRL applied no such correction",
    )
    eval: EvalDuringTraining = setting(default_factory=EvalDuringTraining, help="validation during training")
    warm_start: WarmStartConfig = setting(default_factory=WarmStartConfig, help="optional supervised warm start")
    save_every: int = setting(50, help="write a checkpoint (for --resume) every K optimizer steps")
    keep_checkpoints: int = setting(
        1, help="complete checkpoints kept for --resume (the latest ones); 2 lets --resume --fallback step back one "
        "checkpoint when the last is damaged, at one more checkpoint of disk (about 3x the model)"
    )
    log_samples: bool = setting(True, help="append every rollout (prompt id, completion, rewards) to RUN_DIR/samples.jsonl")
    report_to: list[Annotated[str, AfterValidator(registered_report_to)]] = setting(
        default_factory=lambda: ["tensorboard"],
        help="metric back-ends besides metrics.jsonl: tensorboard (RUN_DIR/tensorboard, tomrl's own writer) and any "
        "transformers integration (" + ", ".join(name for name in REPORT_TO if name != "tensorboard") + "; each reads its "
        "own variables, e.g. WANDB_*); checked for its package before the run starts"
    )
    progress: bool = setting(True, help="show rich progress bars")

    def __post_init__(self) -> None:
        step = self.prompts_per_step * self.rollouts_per_prompt
        if self.prompts_per_step < 1:
            raise ValueError(f"prompts_per_step must be >= 1, got {self.prompts_per_step}")
        if self.rollouts_per_prompt < 2:
            raise ValueError(f"rollouts_per_prompt must be >= 2 (advantages compare completions), got {self.rollouts_per_prompt}")
        if self.micro_batch_size < 1 or step % self.micro_batch_size != 0:
            raise ValueError(
                f"micro_batch_size ({self.micro_batch_size}) must divide the completions of one step: "
                f"prompts_per_step x rollouts_per_prompt = {step}"
            )
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.temperature == 0:
            raise ValueError("temperature 0 (greedy) gives identical rollouts and no learning signal; use > 0")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if self.kl_coef < 0:
            raise ValueError(f"kl_coef must be >= 0, got {self.kl_coef}")
        if not 0 < self.gamma <= 1:
            raise ValueError(f"gamma must be in (0, 1], got {self.gamma}")
        if self.clip_epsilon <= 0 or (self.clip_epsilon_high is not None and self.clip_epsilon_high <= 0):
            raise ValueError("clip_epsilon and clip_epsilon_high must be > 0")
        if self.epochs <= 0 and self.max_steps < 1:
            raise ValueError("give epochs > 0 or max_steps >= 1")
        if self.max_steps == 0 or self.max_steps < -1:
            raise ValueError(f"max_steps must be -1 (use epochs) or >= 1, got {self.max_steps}")
        if self.max_prompt_length < 1 or self.max_completion_length < 1:
            raise ValueError("max_prompt_length and max_completion_length must be >= 1")
        if not self.rewards:
            raise ValueError("rewards must name at least one reward function")
        if self.reward_weights is not None and len(self.reward_weights) != len(self.rewards):
            raise ValueError(f"reward_weights has {len(self.reward_weights)} weights for {len(self.rewards)} rewards")
        if self.save_every < 1:
            raise ValueError(f"save_every must be >= 1, got {self.save_every}")
        if self.keep_checkpoints < 1:
            raise ValueError(f"keep_checkpoints must be >= 1 (--resume needs one), got {self.keep_checkpoints}")
        if self.num_iterations < 1:
            raise ValueError(f"num_iterations must be >= 1, got {self.num_iterations}")
        if self.dynamic_sampling_max_rounds < 1:
            raise ValueError(f"dynamic_sampling_max_rounds must be >= 1, got {self.dynamic_sampling_max_rounds}")
        own_advantages = ALGORITHMS[self.algorithm].advantages is not None
        if own_advantages and self.scale_rewards != "group":
            raise ValueError(f"scale_rewards applies to TRL's group-normalised advantages (grpo) only, not to {self.algorithm}'s")
        if self.kl_in_reward and not own_advantages:
            raise ValueError(f"kl_in_reward=true needs an algorithm that computes its own advantages ({self.algorithm}'s KL is in the loss)")
        for name, options in self.reward_options.items():
            if name not in self.rewards:
                raise ValueError(f"reward_options.{name}: {name!r} is not one of rewards {self.rewards}")
            try:
                make_reward(name, **options)  # an unknown, mistyped or impossible option fails here, before any data is prepared
            except (TypeError, ConfigError) as error:  # TypeError: a reward that takes no options
                raise ValueError(f"reward_options.{name}: {error}") from None
        if self.rollout_engine == "slots" and (self.use_vllm or self.lora.enabled):
            raise ValueError("rollout_engine=slots cannot sample for use_vllm or a LoRA policy; set it to auto or transformers")
        if not 0 < self.vllm_gpu_memory_utilization <= 1:
            raise ValueError(f"vllm_gpu_memory_utilization must be in (0, 1], got {self.vllm_gpu_memory_utilization}")
        if self.use_vllm and self.stop_at_answer:
            raise ValueError("stop_at_answer is implemented for transformers rollouts; with use_vllm leave it false")
        for key, tokens in (("max_completion_length", self.max_completion_length), ("eval.max_new_tokens", self.eval.max_new_tokens)):
            problem = generation_length_problem(self.model, tokens)  # the model's context, from its config.json where on disk
            if problem:
                raise ValueError(f"{key}: {problem}")

    @property
    def completions_per_step(self) -> int:
        return self.prompts_per_step * self.rollouts_per_prompt

    @property
    def puts_kl_in_reward(self) -> bool:
        """Where beta*KL goes: the token rewards (REINFORCE++) or the loss (GRPO, TRL's k3 estimator)."""
        return ALGORITHMS[self.algorithm].kl_in_reward if self.kl_in_reward is None else self.kl_in_reward


__all__ = ["TrainConfig", "DataConfig", "LoraSettings", "EvalDuringTraining", "WarmStartConfig"]
