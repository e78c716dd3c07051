"""The worked examples of "Extending tomrl", run as written: a toy reward and a toy algorithm added
through the registries, then checked by the config loader, scored from Python and the CLI, and
trained with for a real TRL step on the tiny Qwen2."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
import torch
from safetensors.torch import load_file

from tomrl.cli import main
from tomrl.config import ConfigError, load_config, setting
from tomrl.models import resolve_model
from tomrl.rewards.base import Reward, RewardResult, completion_text
from tomrl.rewards.functions import REWARDS, make_reward, register_reward, score_one
from tomrl.training.algorithms import ALGORITHMS, register_algorithm
from tomrl.training.config import TrainConfig
from tomrl.training.run import train

# ----------------------------------------------------------------------------- the docs' reward


@dataclass(frozen=True)
class VowelOptions:
    letters: str = setting("aeiou", help="the letters that count as vowels")


class VowelShare(Reward):
    """The share of vowels in the completion: a toy reward that differs between random completions."""

    name = "vowels"
    needs = ()  # dataset columns it must have (the answer rewards need ("answer",))

    def __init__(self, prefill: str = "<think>", options: VowelOptions = VowelOptions()):
        self.options = options
        super().__init__(prefill)

    def score(self, completion, answer=None, prefill=None, **columns) -> RewardResult:
        text = completion_text(completion).lower()
        share = sum(c in self.options.letters for c in text) / max(len(text), 1)
        return RewardResult(reward=self.name, score=share, format_ok=True, correct=share > 0.5, extracted=None, components={"share": share})


# ----------------------------------------------------------------------------- the docs' algorithm


def sign_advantages(batch):
    """+1 or -1 per completion: above or below its prompt group's mean reward (0 when equal)."""
    grouped = batch.rewards.view(-1, batch.group_size)  # every process's rewards, one row per prompt
    signs = torch.sign(grouped - grouped.mean(dim=1, keepdim=True)).view(-1)
    return signs[batch.rows].to(batch.mask.device)  # (B,): this process's completions


@pytest.fixture
def extensions():
    """The docs' two registrations (the algorithm's calls recorded), removed again after the test."""
    calls = []

    def recorded(batch):
        calls.append((batch, sign_advantages(batch)))
        return calls[-1][1]

    register_reward("vowels", VowelShare, help="share of vowels in the completion", options=VowelOptions)
    register_algorithm("sign", recorded, kl_in_reward=False, help="the sign of each reward against its group's mean")
    yield calls
    del REWARDS["vowels"], ALGORITHMS["sign"]


def test_a_registered_reward_is_scored_checked_and_listed(extensions, tmp_path, capsys):
    assert score_one("vowels", "a cat").score == pytest.approx(0.4)
    assert make_reward("vowels", letters="aeiouy").score("my cat").score == pytest.approx(2 / 6)
    with pytest.raises(ConfigError, match=r"options of reward 'vowels': unknown key 'leters' \(did you mean 'letters'\?\)"):
        make_reward("vowels", leters="y")
    with pytest.raises(ConfigError, match="key 'rewards.0': .*unknown reward 'vowel'; known: .*vowels"):
        load_config(TrainConfig, "configs/train/smoke_cpu.yaml", ["rewards=[vowel]"])
    with pytest.raises(ConfigError, match="unknown key 'leters'"):
        load_config(TrainConfig, "configs/train/smoke_cpu.yaml", ["rewards=[vowels]", "reward_options={vowels: {leters: y}}"])

    source, out = tmp_path / "completions.jsonl", tmp_path / "scored.jsonl"
    source.write_text(json.dumps({"completion": "a cat", "answer": "box"}) + "\n")
    assert main(["reward", "score", "--reward", "vowels", "--input", str(source), "--out", str(out)]) == 0
    assert json.loads(out.read_text())["components"] == {"share": pytest.approx(0.4)}
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["reward", "score", "--help"])
    assert "vowels (share of vowels in the completion; options: letters)" in " ".join(capsys.readouterr().out.split())


def test_a_registered_algorithm_trains_with_a_registered_reward(extensions, tmp_path):
    cfg = load_config(
        TrainConfig,
        "configs/train/smoke_cpu.yaml",
        ["algorithm=sign", "rewards=[vowels]", "reward_options={vowels: {letters: aeiouy}}", "max_steps=1", "rollouts_per_prompt=4",
         "micro_batch_size=8", "max_completion_length=8", f"run_dir={tmp_path / 'run'}", "eval.at_start=false", "eval.every_steps=0",
         "progress=false"],
    )
    assert not cfg.puts_kl_in_reward  # the algorithm's place for the KL: TRL's loss
    summary = train(cfg)
    assert summary.steps == 1
    run = tmp_path / "run"
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 2 * 4 and all(set(s["rewards"]) == {"vowels"} for s in samples)
    # The registered function made the step's advantages, from the registered reward's scores.
    [(batch, advantages)] = extensions
    assert batch.rewards.tolist() == pytest.approx([s["rewards"]["vowels"] for s in samples])
    assert set(advantages.tolist()) <= {-1.0, 0.0, 1.0} and advantages.abs().sum() > 0
    before = load_file(f"{resolve_model('tiny-qwen2')}/model.safetensors")
    after = load_file(run / "final" / "model.safetensors")
    assert any(not torch.equal(before[name], after[name]) for name in before), "no parameter changed"
