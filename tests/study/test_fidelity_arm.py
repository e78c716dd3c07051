"""The fidelity arm: GRPO with the reasoning-fidelity reward added to the answer reward, at the budget of the
other arms; its weight and options come from the study config and are checked at load; one real step of it
runs on tiny-qwen2 and logs the fidelity reward beside the answer reward."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from tomrl.config import ConfigError, load_config
from tomrl.rewards.fidelity import FidelityOptions
from tomrl.study.arms import arm_train_config, budget_of, run_arm
from tomrl.study.config import StudyConfig
from tomrl.study.grid import expand
from tomrl.study.runner import base_train_config, check_and_record, find_config

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "configs" / "study" / "smoke.yaml"
CPU_FIDELITY = REPO / "configs" / "study" / "cpu_fidelity.yaml"


def smoke(*overrides: str) -> StudyConfig:
    return load_config(StudyConfig, SMOKE, ["arms=[grpo, fidelity]", *overrides])


def cell_config(cfg: StudyConfig, arm: str, run_dir, seed: int = 0):
    return arm_train_config(arm, cfg, find_config(cfg.train_config), cfg.mixtures[0], seed, "tiny-qwen2", run_dir)


def test_fidelity_arm_adds_the_reward_with_its_weight_and_options_at_the_same_budget(tmp_path):
    cfg = smoke("fidelity.weight=0.25", "fidelity.options.timing=final", "fidelity.options.contradiction_penalty=2", "updates=3")
    grpo, fidelity = cell_config(cfg, "grpo", tmp_path / "g"), cell_config(cfg, "fidelity", tmp_path / "f")
    base = base_train_config(cfg)
    assert grpo.rewards == base.rewards and "fidelity" not in grpo.rewards and grpo.reward_options == {}
    assert fidelity.rewards == [*base.rewards, "fidelity"]
    assert fidelity.reward_weights == [1.0] * len(base.rewards) + [0.25]
    assert fidelity.reward_options == {"fidelity": asdict(FidelityOptions(timing="final", contradiction_penalty=2.0))}
    assert fidelity.algorithm == "grpo" and fidelity.prompt == grpo.prompt
    # matched budget: the same stories, updates, seed and starting model
    for key in ("data", "max_steps", "prompts_per_step", "rollouts_per_prompt", "seed", "model", "warm_start", "learning_rate"):
        assert getattr(fidelity, key) == getattr(grpo, key), key
    assert budget_of(fidelity) == budget_of(grpo)


def test_existing_reward_weights_are_kept():
    cfg = smoke("train_overrides=[progress=false, 'rewards=[paper, paper_b]', 'reward_weights=[2, 0.5]']")
    train_cfg = cell_config(cfg, "fidelity", "runs/x")
    assert train_cfg.rewards == ["paper", "paper_b", "fidelity"] and train_cfg.reward_weights == [2.0, 0.5, cfg.fidelity.weight]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("fidelity.options.timing=sometimes", r"fidelity\.options\.timing.*'any' or 'final'"),
        ("fidelity.options.timng=final", "did you mean 'fidelity.options.timing'"),
        ("fidelity.options.contradiction_penalty=-1", "fidelity.options.contradiction_penalty"),
        ("fidelity.weight=0", "fidelity.weight must be > 0"),
        ("arms=[grpo, fidelty]", "arms"),
    ],
)
def test_bad_fidelity_settings_fail_at_load(override, message):
    with pytest.raises(ConfigError, match=message):
        smoke(override)


def test_a_base_config_that_already_has_the_fidelity_reward_is_refused():
    cfg = smoke("train_overrides=[progress=false, 'rewards=[paper, fidelity]']")
    with pytest.raises(ConfigError, match="already has rewards"):
        cell_config(cfg, "fidelity", "runs/x")


def test_cpu_fidelity_study_loads_with_the_tasks_the_question_needs():
    cfg = load_config(StudyConfig, CPU_FIDELITY)
    assert list(cfg.arms) == ["grpo", "fidelity"] and len(cfg.mixtures) == 1 and len(cfg.seeds) == 2
    cells = expand(cfg, base_train_config(cfg).model)
    assert len(cells) == 4
    train_cfg = arm_train_config("fidelity", cfg, find_config(cfg.train_config), cfg.mixtures[0], 0, "smollm2-135m", "runs/x")
    assert train_cfg.rewards == ["paper", "fidelity"] and train_cfg.reward_weights == [1.0, cfg.fidelity.weight]
    assert train_cfg.reward_options["fidelity"]["timing"] == "final"
    tasks = {task.name: task for task in cfg.tasks}
    assert any("shortcut_neutral" in (task.generate or "") + str(task.generate_overrides) or "neutral" in (task.generate or "")
               for task in tasks.values() if task.held_out)
    assert any("pairs=true" in task.generate_overrides for task in tasks.values())
    assert any("orders=[3]" in task.generate_overrides and task.held_out for task in tasks.values())


def test_a_study_started_before_the_fidelity_key_existed_continues(tmp_path):
    """study.yaml files written before StudyConfig had ``fidelity`` lack the key: it counts as its default."""
    import yaml

    cfg = load_config(StudyConfig, SMOKE, [f"out_dir={tmp_path}"])
    check_and_record(cfg, base_train_config(cfg), tmp_path)
    saved = yaml.safe_load((tmp_path / "study.yaml").read_text())
    del saved["fidelity"]
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(saved, sort_keys=False))
    check_and_record(cfg, base_train_config(cfg), tmp_path)  # the default: accepted
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(saved, sort_keys=False))
    with pytest.raises(ConfigError, match="fidelity"):
        check_and_record(load_config(StudyConfig, SMOKE, [f"out_dir={tmp_path}", "fidelity.weight=2"]), base_train_config(cfg), tmp_path)


def test_one_real_step_of_the_fidelity_arm_logs_both_rewards(tmp_path):
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tests share the CPU with other jobs (as configs/study/smoke.yaml's threads: 1)
    try:
        cfg = smoke("updates=1", "eval.checkpoint_every=0", "fidelity.weight=0.5")
        train_cfg = replace(cell_config(cfg, "fidelity", tmp_path / "run"), max_completion_length=8, rollouts_per_prompt=2, micro_batch_size=2)
        summary = run_arm("fidelity", train_cfg, cfg, say=lambda _: None)
    finally:
        torch.set_num_threads(threads)
    assert summary["steps"] == 1
    run = tmp_path / "run"
    (row,) = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    for key in ("rewards/paper/mean", "rewards/fidelity/mean", "reward_components/fidelity/checkable", "reward_components/paper/answer"):
        assert key in row, key
    assert row["reward"] == pytest.approx(row["rewards/paper/mean"] + 0.5 * row["rewards/fidelity/mean"], abs=1e-5)
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert samples and all(set(s["rewards"]) == {"paper", "fidelity"} for s in samples)
    arm = json.loads((run / "study_arm.json").read_text())
    assert arm["arm"] == "fidelity" and arm["rewards"] == ["paper", "fidelity"] and arm["reward_weights"] == [1.0, 0.5]
    assert arm["reward_options"]["fidelity"]["consistency"] is True
    assert (run / "final").is_dir()
