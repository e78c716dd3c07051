"""The algorithm registry: the shipped entries, its own checks, and the config checks it drives."""

from __future__ import annotations

import pytest

from tomrl.config import ConfigError, load_config
from tomrl.training.advantages import reinforce_pp_advantages, reinforce_pp_baseline_advantages
from tomrl.training.algorithms import ALGORITHMS, Algorithm, register_algorithm
from tomrl.training.config import TrainConfig

SMOKE = "configs/train/smoke_cpu.yaml"


def test_shipped_algorithms_run_the_tested_functions():
    assert list(ALGORITHMS) == ["grpo", "reinforce_pp", "reinforce_pp_baseline"]
    assert ALGORITHMS["grpo"].advantage_function() is None  # TRL's group-normalised advantages
    assert ALGORITHMS["reinforce_pp"].advantage_function() is reinforce_pp_advantages
    assert ALGORITHMS["reinforce_pp_baseline"].advantage_function() is reinforce_pp_baseline_advantages
    assert [a.kl_in_reward for a in ALGORITHMS.values()] == [False, True, False]


def test_registration_refuses_a_second_name_and_a_kl_with_nowhere_to_go():
    with pytest.raises(ValueError, match="already registered"):
        register_algorithm("grpo", None, kl_in_reward=False, help="a second grpo")
    with pytest.raises(ValueError, match="only where the algorithm computes advantages"):
        register_algorithm("nowhere", None, kl_in_reward=True, help="TRL's advantages, KL in the rewards")
    assert "nowhere" not in ALGORITHMS


def test_config_checks_follow_the_registry(monkeypatch):
    with pytest.raises(ConfigError, match="key 'algorithm': .*unknown algorithm 'own'; known: grpo, reinforce_pp, reinforce_pp_baseline"):
        load_config(TrainConfig, SMOKE, ["algorithm=own"])
    monkeypatch.setitem(ALGORITHMS, "own", Algorithm("own", lambda batch: batch.local_rewards, kl_in_reward=True, help="the rewards"))
    assert load_config(TrainConfig, SMOKE, ["algorithm=own"]).puts_kl_in_reward
    assert not load_config(TrainConfig, SMOKE, ["algorithm=own", "kl_in_reward=false"]).puts_kl_in_reward
    with pytest.raises(ConfigError, match="scale_rewards applies to TRL's group-normalised advantages"):
        load_config(TrainConfig, SMOKE, ["algorithm=own", "scale_rewards=batch"])
