"""TrainConfig: shipped YAML files, impossible values, and the paper configs' hyper-parameters."""

from __future__ import annotations

from pathlib import Path

import pytest

from tomrl.config import ConfigError, load_config
from tomrl.training.config import TrainConfig

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
TRAIN_YAML = sorted((CONFIGS / "train").glob("*.yaml"))


def test_expected_train_configs_are_shipped():
    names = {p.name for p in TRAIN_YAML}
    expected = {f"paper_a_qwen2.5-{s}.yaml" for s in ("0.5b", "1.5b", "3b", "7b")}
    expected |= {"paper_b_qwen2.5-7b.yaml", "smoke_cpu.yaml", "demo_cpu.yaml"}
    assert expected <= names


@pytest.mark.parametrize("path", TRAIN_YAML, ids=lambda p: p.name)
def test_train_yaml_loads(path):
    cfg = load_config(TrainConfig, path)
    assert cfg.completions_per_step % cfg.micro_batch_size == 0


@pytest.mark.parametrize("size", ["0.5b", "1.5b", "3b", "7b"])
def test_paper_a_hyperparameters(size):
    cfg = load_config(TrainConfig, CONFIGS / "train" / f"paper_a_qwen2.5-{size}.yaml")
    assert cfg.model == f"Qwen/Qwen2.5-{size.upper()}-Instruct"
    assert (cfg.algorithm, cfg.prompts_per_step, cfg.rollouts_per_prompt) == ("grpo", 8, 16)
    assert (cfg.learning_rate, cfg.lr_scheduler, cfg.epochs) == (5e-7, "constant", 2)
    assert (cfg.kl_coef, cfg.clip_epsilon, cfg.entropy_coef, cfg.temperature) == (0.001, 0.2, 0.001, 1.0)
    assert (cfg.max_prompt_length, cfg.max_completion_length) == (1024, 2048)
    assert cfg.rewards == ["paper"] and cfg.prompt.style == "paper_a" and not cfg.puts_kl_in_reward


def test_paper_b_hyperparameters():
    cfg = load_config(TrainConfig, CONFIGS / "train" / "paper_b_qwen2.5-7b.yaml")
    assert (cfg.algorithm, cfg.prompts_per_step, cfg.rollouts_per_prompt) == ("reinforce_pp", 8, 8)
    assert (cfg.learning_rate, cfg.temperature, cfg.epochs) == (5e-7, 0.6, 10)
    assert cfg.rewards == ["paper_b"] and cfg.puts_kl_in_reward and cfg.eval.keep_best


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["micro_batch_size=3"], "micro_batch_size"),
        (["temperature=-0.5"], "temperature"),
        (["temperature=0"], "greedy"),
        (["rollouts_per_prompt=1"], "rollouts_per_prompt"),
        (["algorithm=ppo"], "algorithm"),
        (["loss_type=sum"], "loss_type"),
        (["kl_in_reward=true"], "kl_in_reward"),
        (["algorithm=reinforce_pp", "scale_rewards=batch"], "scale_rewards"),
        (["reward_weights=[1.0, 2.0]"], "reward_weights"),
        (["max_steps=0"], "max_steps"),
        (["learning_rat=1e-5"], "did you mean 'learning_rate'"),
        (["data.recipe=tomrl-paper"], "one source"),
        (["eval.temperature=-1"], "eval.temperature"),
        (["lora.rank=0"], "lora.rank"),
        (["data.generate=null"], "need data.generate"),
    ],
)
def test_impossible_values_are_errors_naming_the_key(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(TrainConfig, CONFIGS / "train" / "smoke_cpu.yaml", overrides)


def test_kl_placement_follows_the_algorithm():
    smoke = CONFIGS / "train" / "smoke_cpu.yaml"
    assert not load_config(TrainConfig, smoke, ["algorithm=grpo"]).puts_kl_in_reward
    assert load_config(TrainConfig, smoke, ["algorithm=reinforce_pp"]).puts_kl_in_reward
    assert not load_config(TrainConfig, smoke, ["algorithm=reinforce_pp_baseline"]).puts_kl_in_reward
    assert load_config(TrainConfig, smoke, ["algorithm=reinforce_pp_baseline", "kl_in_reward=true"]).puts_kl_in_reward


@pytest.mark.parametrize("path", sorted((CONFIGS / "accelerate").glob("*.yaml")), ids=lambda p: p.name)
def test_accelerate_configs_parse_with_accelerate(path):
    from accelerate.commands.config.config_args import load_config_from_file

    parsed = load_config_from_file(str(path))
    assert parsed.num_processes >= 1 and parsed.mixed_precision == "bf16"


def test_grpo_arguments_map_the_batch_arithmetic(tmp_path):
    from tomrl.training.run import grpo_arguments

    cfg = load_config(TrainConfig, CONFIGS / "train" / "paper_a_qwen2.5-0.5b.yaml", [f"run_dir={tmp_path}", "use_vllm=false",
                                                                                        "precision=float32"])
    args = grpo_arguments(cfg)
    assert args.num_generations == 16 and args.generation_batch_size == 128
    assert args.per_device_train_batch_size * args.gradient_accumulation_steps == 128
    assert (args.beta, args.epsilon, args.entropy_coef, args.loss_type) == (0.001, 0.2, 0.001, "bnpo")
    assert args.shuffle_dataset is False and args.steps_per_generation == args.gradient_accumulation_steps
