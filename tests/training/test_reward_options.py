"""Reward options in a training config: every option of a reward can be set from YAML or key=value, is
checked at load against the reward's options dataclass, reaches the reward the run builds, and is listed
with its help text in ``tomrl train --help`` and ``tomrl reward score --help`` (which takes ``--option``)."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest

from tomrl.config import ConfigError, describe, load_config
from tomrl.rewards.fidelity import FidelityOptions
from tomrl.rewards.functions import REWARDS, make_reward
from tomrl.training.config import TrainConfig

SMOKE = "configs/train/smoke_cpu.yaml"
WITH_FIDELITY = ["rewards=[paper, fidelity]"]
# a value other than the default for every option
NON_DEFAULT = {"timing": "final", "contradiction_penalty": 2.5, "semantics": "ordered", "consistency": False}


def test_every_fidelity_option_has_a_non_default_value_here():
    assert set(NON_DEFAULT) == {f.name for f in fields(FidelityOptions)}
    assert all(getattr(FidelityOptions(), key) != value for key, value in NON_DEFAULT.items())


def test_every_option_is_settable_by_override_and_reaches_the_reward():
    overrides = [f"reward_options.fidelity.{key}={str(value).lower() if isinstance(value, bool) else value}" for key, value in NON_DEFAULT.items()]
    cfg = load_config(TrainConfig, SMOKE, [*WITH_FIDELITY, *overrides, "reward_weights=[1, 0.5]"])
    assert cfg.reward_options == {"fidelity": NON_DEFAULT} and cfg.reward_weights == [1.0, 0.5]
    # as tomrl.training.run builds the rewards
    reward = make_reward("fidelity", prefill=cfg.prompt.resolved_prefill, **cfg.reward_options["fidelity"])
    assert reward.options == FidelityOptions(**NON_DEFAULT)


def test_options_from_a_yaml_file(tmp_path):
    path = tmp_path / "train.yaml"
    path.write_text(open(SMOKE).read() + "\nrewards: [paper, fidelity]\nreward_weights: [1.0, 0.25]\nreward_options:\n  fidelity: {timing: final, consistency: false}\n")
    cfg = load_config(TrainConfig, path)
    assert cfg.reward_options == {"fidelity": {"timing": "final", "consistency": False}}
    assert cfg.reward_weights == [1.0, 0.25]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["reward_options.fidelity.timing=last"], r"reward_options\.fidelity: options of reward 'fidelity': key 'timing': Input should be 'any' or 'final'"),
        (["reward_options.fidelity.timng=final"], r"reward_options\.fidelity: .*unknown key 'timng' \(did you mean 'timing'\?\); its options:\nfidelity\.timing"),
        (["reward_options.fidelity.consistency=perhaps"], r"key 'consistency': Input should be a valid boolean"),
        (["reward_options.fidelity.contradiction_penalty=-1"], r"key 'contradiction_penalty': Input should be greater than or equal to 0"),
        (["reward_options.fidelity.semantics=strict"], r"key 'semantics'.*'joint' or 'ordered'"),
        (["reward_options.fidelity=final"], r"reward_options\.fidelity.*valid dictionary"),
        (["reward_options.paper.timing=final"], r"reward_options\.paper: reward 'paper' takes no options"),
        (["reward_weights=[1]"], "reward_weights has 1 weights for 2 rewards"),
    ],
)
def test_bad_options_fail_at_load_naming_reward_option_and_values(overrides, message):
    with pytest.raises(ConfigError, match=message) as caught:
        load_config(TrainConfig, SMOKE, [*WITH_FIDELITY, *overrides])
    assert "'model':" not in str(caught.value)  # the message is the problem, not a dump of the whole config


def test_options_of_a_reward_that_is_not_trained_are_an_error():
    with pytest.raises(ConfigError, match=r"reward_options\.fidelity: 'fidelity' is not one of rewards \['paper'\]"):
        load_config(TrainConfig, SMOKE, ["reward_options.fidelity.timing=final"])


def test_train_help_lists_every_option_with_its_help():
    (row,) = [r for r in describe(TrainConfig) if r[0] == "reward_options"]
    for entry in REWARDS.values():
        for option in fields(entry.options) if entry.options else ():
            assert f"{entry.name}.{option.name} [" in row[3]
            assert option.metadata["help"] in row[3]


def test_reward_score_takes_options(tmp_path, capsys):
    from tomrl.cli import main

    story = "1 Anna and Ben entered the kitchen.\n2 The apple is in the red_box.\n3 Ben exited the kitchen.\n4 Anna moved the apple to the blue_box.\n"
    rows = [{"completion": "The apple is in the red_box.</think><answer>x</answer>", "answer": "x", "story": story, "source": "hitom"}]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    scores = {}
    for timing in ("any", "final"):
        out = tmp_path / f"{timing}.jsonl"
        assert main(["reward", "score", "--reward", "fidelity", "--option", f"timing={timing}", "--input", str(source), "--out", str(out)]) == 0
        scores[timing] = json.loads(out.read_text())["score"]
    assert scores == {"any": 1.0, "final": -1.0}  # a stale location: held once, not at the end
    assert main(["reward", "score", "--reward", "fidelity", "--option", "timin=final", "--input", str(source), "--out", str(tmp_path / "x")]) == 2
    assert "did you mean 'timing'" in capsys.readouterr().err
    assert main(["reward", "score", "--reward", "paper", "--option", "timing=final", "--input", str(source), "--out", str(tmp_path / "x")]) == 2
    assert "takes no options" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["reward", "score", "--help"])
    assert "fidelity.consistency [bool] = True" in capsys.readouterr().out
