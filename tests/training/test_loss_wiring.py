"""What TRL's loss gets from tomrl, on a real generation batch of the tiny Qwen2 (CPU).

- An algorithm with its own advantage function (``reinforce_pp``, ``reinforce_pp_baseline``): the
  batch's advantages are that registered function's output for the batch's rewards, and the loss
  is computed from them unchanged.
- ``kl_coef`` (TrainConfig's help): ``+ kl_coef × k3 KL`` per token in the loss, averaged as the
  policy loss (``grpo``, ``reinforce_pp_baseline``), or, with the KL in the rewards, no KL term in
  the loss and ``− kl_coef × KL`` in the token rewards (``reinforce_pp``, or ``kl_in_reward=true``).
- ``entropy_coef``: ``− entropy_coef × the mean token entropy`` of the micro-batch.

The policy is perturbed before sampling, so that it differs from the reference model and every KL
term is far from zero (as after some training); the loss is taken before any update, so the PPO
ratio is 1 and the policy term is minus the advantages, averaged per sequence, then over sequences.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from test_train_smoke import VowelShareReward, smoke_config

from tomrl.models import resolve_model
from tomrl.training.advantages import AdvantageInputs
from tomrl.training.algorithms import ALGORITHMS
from tomrl.training.data import prepare_data
from tomrl.training.run import build_trainer

KL_COEF, ENTROPY_COEF = 0.5, 0.3


def trainer_and_batch(tmp_path, *overrides: str):
    """A tomrl trainer with a perturbed policy, and one generation batch it sampled and scored for training."""
    cfg = smoke_config(tmp_path, "precision=float32", f"kl_coef={KL_COEF}", f"entropy_coef={ENTROPY_COEF}", "rollouts_per_prompt=4",
                       "micro_batch_size=8", "max_completion_length=8", *overrides)
    train_examples, validation_examples = prepare_data(cfg, Path(cfg.run_dir))
    trainer = build_trainer(cfg, str(resolve_model(cfg.model)), train_examples, validation_examples, [VowelShareReward(prefill="<think>")])[0]
    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in trainer.model.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    trainer.model.train()
    rows = [trainer.train_dataset[index] for index in range(cfg.prompts_per_step)]
    inputs = [row for row in rows for _ in range(cfg.rollouts_per_prompt)]  # TRL's order: each prompt's rollouts in a row
    return cfg, trainer, trainer._generate_and_score_completions(inputs)


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "algorithm, kl_in_reward", [("grpo", "null"), ("reinforce_pp", "null"), ("reinforce_pp_baseline", "null"), ("reinforce_pp_baseline", "true")]
)
def test_the_loss_takes_the_algorithms_advantages_and_the_documented_kl_and_entropy_terms(tmp_path, algorithm, kl_in_reward):
    cfg, trainer, batch = trainer_and_batch(tmp_path, f"algorithm={algorithm}", f"kl_in_reward={kl_in_reward}")
    assert cfg.puts_kl_in_reward == (algorithm == "reinforce_pp" or kl_in_reward == "true")
    mask = batch["completion_mask"].float()
    ref_logps = batch["ref_per_token_logps"]

    advantage_function = ALGORITHMS[algorithm].advantage_function()
    if advantage_function is None:
        assert batch["advantages"].dim() == 1  # TRL's own group-normalised advantages
    else:
        # The rewards as tomrl's logging recorded them per rollout, not the tensor the trainer read.
        rewards = torch.tensor([row["rewards"]["vowel_share"] for row in trainer.sample_rows])
        inputs = AdvantageInputs(rewards, batch["completion_mask"], cfg.rollouts_per_prompt, logps=batch.get("old_per_token_logps"),
                                 ref_logps=ref_logps, kl_coef=KL_COEF if cfg.puts_kl_in_reward else 0.0)
        torch.testing.assert_close(batch["advantages"], advantage_function(inputs))
        if cfg.puts_kl_in_reward:  # the KL shapes the advantages: without it they would differ
            assert not torch.allclose(batch["advantages"], advantage_function(replace(inputs, kl_coef=0.0)), atol=1e-3)

    with torch.no_grad():
        ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        logps, entropies, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, attention, mask.size(1), compute_entropy=True)
    old_logps = batch.get("old_per_token_logps")
    ratio = torch.exp(logps - (logps if old_logps is None else old_logps))
    assert torch.allclose(ratio, torch.ones_like(ratio), atol=1e-4)  # no update yet: inside the clip range
    advantages = batch["advantages"] if batch["advantages"].dim() == 2 else batch["advantages"].unsqueeze(1)
    per_token = -advantages * ratio
    k3 = torch.exp(ref_logps - logps) - (ref_logps - logps) - 1
    tokens = mask.sum(-1).clamp(min=1.0)
    kl_term = KL_COEF * ((k3 * mask).sum(-1) / tokens).mean()
    assert kl_term > 1e-2  # the perturbed policy is far enough from the reference for the term to show
    per_token = per_token + (0.0 if cfg.puts_kl_in_reward else KL_COEF * k3)
    entropy_term = ENTROPY_COEF * (entropies * mask).sum() / mask.sum()
    assert entropy_term > 1e-2
    expected = ((per_token * mask).sum(-1) / tokens).mean() - entropy_term

    trainer.current_gradient_accumulation_steps = 1  # set by the training loop; one micro-batch per step here
    loss = trainer._compute_loss(trainer.model, batch)
    assert loss.item() == pytest.approx(expected.item(), abs=1e-5)
    assert trainer.beta == KL_COEF  # the loss's KL switch is restored after a KL-in-the-rewards loss
