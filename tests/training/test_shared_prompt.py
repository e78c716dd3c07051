"""One forward pass per prompt in the GRPO loss (tomrl.training.shared_prompt).

The shared pass must give the log-probabilities, entropies and gradients of TRL's full-row
forward (left-padded prompts of different lengths, right-padded completions, bf16 autocast too),
keep a prompt's rollouts together when shuffling, and change nothing in a real training step but
the time it takes.
"""

from __future__ import annotations

import contextlib
import json

import pytest
import torch
from test_rollouts import smoke_config
from test_train_smoke import VowelShareReward
from trl.trainer.utils import add_fused_lm_head

from tomrl.training.run import train
from tomrl.training.shared_prompt import prompt_groups, shared_prompt_logps, shuffle_prompt_groups


def _rows(vocab: int, pad: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, int]:
    """3 prompts (lengths 7, 11, 4) x 3 rollouts (lengths up to 6), padded as TRL pads them, rows interleaved."""
    generator = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(5, vocab, (n,), generator=generator) for n in (7, 11, 4)]
    completions = [torch.randint(5, vocab, (n,), generator=generator) for n in (6, 3, 5, 1, 6, 2, 4, 6, 5)]
    P, C = max(len(p) for p in prompts), max(len(c) for c in completions)
    ids, mask = [], []
    for row, completion in enumerate(completions):
        prompt = prompts[row % 3]  # rows of a prompt are not adjacent: grouping must not rely on order
        left = P - len(prompt)
        right = C - len(completion)
        ids.append(torch.cat([torch.full((left,), pad), prompt, completion, torch.full((right,), pad)]))
        mask.append(torch.cat([torch.zeros(left), torch.ones(len(prompt) + len(completion)), torch.zeros(right)]))
    return torch.stack(ids), torch.stack(mask).long(), C


def _trl_forward(model, input_ids, attention_mask, completion_length):
    """TRL 1.x's GRPO forward (GRPOTrainer._get_per_token_logps_and_entropies, text only)."""
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    labels[:, :-completion_length] = -100
    outputs = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels, fused_lm_head=True)
    return outputs.log_probs[:, -completion_length:], outputs.entropy[:, -completion_length:]


@pytest.mark.parametrize("architecture", ["tiny_llama", "tiny_qwen2"])
def test_shared_prompt_pass_gives_trls_logprobs_entropies_and_gradients(architecture, request):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(request.getfixturevalue(architecture), dtype=torch.float32)
    add_fused_lm_head(model, temperature=0.7, outputs=("log_probs", "entropy"))
    input_ids, attention_mask, C = _rows(model.config.vocab_size, pad=0)
    mask = attention_mask[:, -C:].bool()

    def run(shared: bool):
        model.zero_grad()
        if shared:
            logps, entropies = shared_prompt_logps(model, input_ids, attention_mask, C, contextlib.nullcontext, compute_entropy=True)
        else:
            logps, entropies = _trl_forward(model, input_ids, attention_mask, C)
        (logps * mask).sum().backward()
        grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
        return logps.detach(), entropies.detach(), grads

    ref_logps, ref_entropies, ref_grads = run(shared=False)
    logps, entropies, grads = run(shared=True)
    assert torch.allclose(logps[mask], ref_logps[mask], atol=1e-5), (logps[mask] - ref_logps[mask]).abs().max()
    assert torch.allclose(entropies[mask], ref_entropies[mask], atol=1e-5)
    assert grads.keys() == ref_grads.keys() and "model.embed_tokens.weight" in grads
    for name, grad in grads.items():  # float rounding only: the summation order differs
        assert (grad - ref_grads[name]).norm() <= 1e-5 * ref_grads[name].norm(), name


def test_shared_prompt_pass_under_bf16_autocast(tiny_llama):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_llama, dtype=torch.float32)
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    input_ids, attention_mask, C = _rows(model.config.vocab_size, pad=0, seed=1)
    mask = attention_mask[:, -C:].bool()

    def autocast():
        return torch.autocast("cpu", dtype=torch.bfloat16)

    with torch.no_grad(), autocast():
        ref, _ = _trl_forward(model, input_ids, attention_mask, C)
    with torch.no_grad():
        logps, entropies = shared_prompt_logps(model, input_ids, attention_mask, C, autocast)
    assert entropies is None
    assert torch.allclose(logps[mask].float(), ref[mask].float(), atol=0.1)  # bf16 rounding, different batch shapes


def test_rows_without_a_shared_prompt_are_left_to_the_callers_forward(tiny_llama):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_llama)
    add_fused_lm_head(model)
    input_ids, attention_mask, C = _rows(model.config.vocab_size, pad=0)
    assert shared_prompt_logps(model, input_ids[:3], attention_mask[:3], C, contextlib.nullcontext) is None


def test_group_shuffle_keeps_a_prompts_rollouts_together():
    input_ids, attention_mask, C = _rows(100, pad=0)
    P = input_ids.size(1) - C
    batch = {"prompt_ids": input_ids[:, :P], "prompt_mask": attention_mask[:, :P], "completion_ids": input_ids[:, P:],
             "row": list(range(9)), "num_items_in_batch": torch.tensor(9)}
    group_of_row, first_rows = prompt_groups(batch["prompt_ids"], batch["prompt_mask"])
    assert group_of_row.tolist() == [0, 1, 2] * 3 and first_rows.tolist() == [0, 1, 2]
    orders = set()
    for seed in range(6):
        torch.manual_seed(seed)
        shuffled = shuffle_prompt_groups(batch)
        assert sorted(shuffled["row"]) == list(range(9)) and shuffled["num_items_in_batch"] == 9
        groups = [row % 3 for row in shuffled["row"]]
        assert groups[0:3] == [groups[0]] * 3 and groups[3:6] == [groups[3]] * 3 and groups[6:9] == [groups[6]] * 3
        assert torch.equal(shuffled["completion_ids"], input_ids[shuffled["row"], P:])  # every field moved in unison
        orders.add(tuple(groups[::3]))
    assert len(orders) > 1  # the groups themselves are shuffled


def test_a_training_step_is_the_same_with_and_without_prompt_sharing(tmp_path, monkeypatch):
    """Same seed, same rollouts: the step's loss and gradient norm match; the shared pass really ran."""
    from tomrl.training import shared_prompt

    calls = []
    original = shared_prompt.shared_prompt_logps

    def counted(*args, **kwargs):
        result = original(*args, **kwargs)
        calls.append(result is not None)
        return result

    monkeypatch.setattr(shared_prompt, "shared_prompt_logps", counted)
    logs = {}
    for share in ("true", "false"):
        run = tmp_path / share
        run.mkdir()
        cfg = smoke_config(run, f"share_prompt_forward={share}", "max_steps=1", "max_completion_length=12", "learning_rate=1e-2",
                           "micro_batch_size=4")  # both prompts in one micro-batch: two groups
        train(cfg, rewards=[VowelShareReward(prefill="<think>")])
        rows = [json.loads(line) for line in (run / "run" / "metrics.jsonl").read_text().splitlines()]
        logs[share] = next(row for row in rows if "grad_norm" in row)
    assert calls and all(calls), "the shared pass did not score the step"
    shared, full = logs["true"], logs["false"]
    assert shared["grad_norm"] == pytest.approx(full["grad_norm"], rel=1e-3)
    assert shared["loss"] == pytest.approx(full["loss"], rel=1e-3, abs=1e-6)
