"""The study config and its grid: cells expand as declared, names and budgets are checked at load, and
every arm of a cell gets the same stories and the same number of optimizer updates."""

from __future__ import annotations

from pathlib import Path

import pytest

from tomrl.config import ConfigError, load_config
from tomrl.schema import Example
from tomrl.study.arms import arm_train_config, budget_of, budget_stories, supervised_settings
from tomrl.study.config import StudyConfig
from tomrl.study.grid import Grid, expand
from tomrl.study.runner import base_train_config, find_config

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "configs" / "study" / "smoke.yaml"
ALL_ARMS = "arms=[grpo, reinforce_pp, sft, rft, answer_only]"


def smoke(*overrides: str) -> StudyConfig:
    return load_config(StudyConfig, SMOKE, list(overrides))


def test_grid_expands_mixtures_arms_seeds_in_order():
    cfg = smoke("seeds=[0, 3]")
    cells = expand(cfg, base_model="tiny-qwen2")
    assert [c.id for c in cells] == [
        "o0__grpo__s0", "o0__grpo__s3", "o0__sft__s0", "o0__sft__s3",
        "o1__grpo__s0", "o1__grpo__s3", "o1__sft__s0", "o1__sft__s3",
    ]
    assert {c.model for c in cells} == {"tiny-qwen2"}
    assert len({c.id for c in cells}) == len(cells) == 2 * 2 * 2


def test_grid_with_several_models_names_the_model_in_each_cell():
    cfg = smoke("models=[tiny-qwen2, /data/Qwen2.5_0.5B-Instruct]")
    cells = expand(cfg, base_model="ignored")
    assert len(cells) == 2 * 2 * 2 * 1
    assert cells[0].id == "o0__grpo__s0__tiny-qwen2"
    assert cells[-1].id == "o1__sft__s0__Qwen2.5-0.5B-Instruct"  # "_" would blur the "__" separators
    assert {c.model for c in cells} == {"tiny-qwen2", "/data/Qwen2.5_0.5B-Instruct"}


def test_grid_json_is_rewritten_on_every_status_change(tmp_path):
    cfg = smoke()
    grid = Grid(tmp_path, cfg.name, expand(cfg, "tiny-qwen2"), [{"name": "t", "held_out": True, "benchmark": "hitom600"}])
    import json

    saved = json.loads((tmp_path / "grid.json").read_text())
    assert [c["status"] for c in saved["cells"]] == ["pending"] * 4
    assert saved["tasks"] == [{"name": "t", "held_out": True, "benchmark": "hitom600"}]
    grid.set("o0__sft__s0", "failed", error="RuntimeError: no rows")
    saved = json.loads((tmp_path / "grid.json").read_text())
    cell = next(c for c in saved["cells"] if c["id"] == "o0__sft__s0")
    assert cell == {"id": "o0__sft__s0", "mixture": "o0", "arm": "sft", "seed": 0, "model": "tiny-qwen2",
                    "status": "failed", "error": "RuntimeError: no rows"}
    with pytest.raises(ValueError):
        grid.set("o0__sft__s0", "finished")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("arms=[grpo, ppo]", "arms"),
        ("seeds=[0, 0]", "seeds must differ"),
        ("updates=0", "updates must be >= 1"),
        ("eval.checkpoint_every=2", "checkpoint_every"),
        ("mixtures=[{name: a__b, recipe: paper-b-hitom}]", "single '_'"),
        ("mixtures=[{name: a, recipe: paper-b-hitom, data: {generate: default}}]", "recipe or data"),
        ("tasks=[{name: t, held_out: true, benchmark: hitom60}]", "did you mean 'hitom600'"),
        ("tasks=[{name: t, held_out: true, benchmark: hitom600, generate: default}]", "benchmark or generate"),
        ("arm_overrides={rft: [seed=1]}", "not one of arms"),
        ("updatez=3", "did you mean 'updates'"),
    ],
)
def test_impossible_studies_fail_at_load(override, message):
    with pytest.raises(ConfigError, match=message):
        smoke(override)


def test_every_arm_gets_the_same_stories_and_updates(tmp_path):
    cfg = smoke(ALL_ARMS, "updates=3")
    base = base_train_config(cfg)
    mixture = cfg.mixtures[0]
    configs = {arm: arm_train_config(arm, cfg, find_config(cfg.train_config), mixture, 5, "tiny-qwen2", tmp_path / arm) for arm in cfg.arms}
    for arm, train_cfg in configs.items():
        assert train_cfg.max_steps == 3, arm
        assert train_cfg.prompts_per_step == base.prompts_per_step, arm
        assert train_cfg.data == mixture.data_config, arm  # the same frozen stories, in the same order (seed)
        assert train_cfg.seed == 5 and train_cfg.model == "tiny-qwen2" and train_cfg.run_dir == str(tmp_path / arm)
        assert budget_of(train_cfg).stories == 3 * base.prompts_per_step
    assert configs["grpo"].algorithm == "grpo" and configs["reinforce_pp"].algorithm == "reinforce_pp"
    assert configs["answer_only"].algorithm == cfg.answer_only.algorithm
    assert configs["answer_only"].prompt.resolved_prefill == "<think> </think><answer>"
    assert configs["grpo"].prompt.resolved_prefill == "<think>"
    # The supervised arms: the same number of updates, each of prompts_per_step rows.
    for arm in ("sft", "rft"):
        settings = supervised_settings(configs[arm], cfg, budget_of(configs[arm]))
        assert settings.max_steps == 3 and settings.batch_size == base.prompts_per_step
        assert settings.learning_rate == base.warm_start.learning_rate  # sft.learning_rate null


def test_a_mixture_may_set_its_own_updates(tmp_path):
    cfg = smoke("mixtures=[{name: a, recipe: paper-b-hitom, updates: 7}, {name: b, recipe: paper-b-fantom}]")
    assert cfg.updates_of("a") == 7 and cfg.updates_of("b") == cfg.updates
    train_cfg = arm_train_config("sft", cfg, find_config(cfg.train_config), cfg.mixtures[0], 0, "tiny-qwen2", tmp_path)
    assert train_cfg.max_steps == 7 and train_cfg.data.recipe == "paper-b-hitom"


def test_budget_stories_are_the_ones_rl_reads_first():
    stories = [Example(id=f"e{i}", source="tomrl", split="train", story="s", question="q", answer="a", order=0,
                       question_type="reality", deception=None, story_length=1, story_id=f"s{i}") for i in range(10)]
    from tomrl.study.arms import Budget

    assert [e.id for e in budget_stories(stories, Budget(updates=2, stories_per_update=3))] == ["e0", "e1", "e2", "e3", "e4", "e5"]
    assert len(budget_stories(stories, Budget(updates=5, stories_per_update=4))) == 10  # RL wraps around: every story once


@pytest.mark.parametrize("name", ["smoke.yaml", "cpu_mini.yaml", "paper_b_mixtures.yaml"])
def test_shipped_studies_load_and_expand(name):
    cfg = load_config(StudyConfig, REPO / "configs" / "study" / name)
    base = base_train_config(cfg)
    cells = expand(cfg, base.model)
    assert len(cells) == len(cfg.mixtures) * len(cfg.arms) * len(cfg.seeds) * max(1, len(cfg.models))
    for mixture in cfg.mixtures:  # every cell's training config is valid, without a GPU
        for arm in cfg.arms:
            arm_train_config(arm, cfg, find_config(cfg.train_config), mixture, cfg.seeds[0], (cfg.models or [base.model])[0], "runs/x")


def test_a_started_study_refuses_other_settings_but_may_grow(tmp_path):
    from tomrl.study.runner import check_and_record

    cfg = smoke(f"out_dir={tmp_path}")
    check_and_record(cfg, base_train_config(cfg), tmp_path)
    check_and_record(smoke(f"out_dir={tmp_path}", "seeds=[0, 1]", "arms=[grpo, sft, rft]", "threads=2"), base_train_config(cfg), tmp_path)
    with pytest.raises(ConfigError, match="updates"):
        check_and_record(smoke(f"out_dir={tmp_path}", "updates=3"), base_train_config(cfg), tmp_path)
    changed_task = smoke(f"out_dir={tmp_path}", "tasks=[{name: order0, held_out: true, benchmark: hitom600}]")
    with pytest.raises(ConfigError, match=r"tasks\[order0\]"):
        check_and_record(changed_task, base_train_config(changed_task), tmp_path)
    other_base = smoke(f"out_dir={tmp_path}", "train_overrides=[learning_rate=0.5]")
    with pytest.raises(ConfigError, match="train_config.learning_rate"):
        check_and_record(other_base, base_train_config(other_base), tmp_path)
