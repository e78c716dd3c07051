"""TRL's GRPOTrainer with REINFORCE++ advantages, answer metrics, rollout stops and atomic checkpoints.

:class:`TomrlGRPOTrainer` keeps TRL's rollout, reward, loss and optimisation code and changes
only what tomrl needs (each override says why):

- ``_generate_and_score_completions``: TRL's (GRPO) advantages are replaced by those of the
  algorithm's own function where it has one (:mod:`tomrl.training.algorithms`); with the KL in the
  reward, the sampling policy's log-probabilities are computed here and ``_compute_loss`` drops TRL's KL term.
  With ``dynamic_sampling``, prompt groups without reward variance are first replaced by groups of
  fresh prompts (:mod:`tomrl.training.dynamic_sampling`).
- ``_calculate_rewards``: also records each reward's components, the format rate and the
  accuracy (from the shared answer checker, via the rewards' ``details``), and one row per
  rollout for ``samples.jsonl``.
- ``_tokenize_prompts``: prompts arrive fully rendered (chat template + prefill), so no special
  tokens are added a second time.
- ``_generate_single_turn``: rollouts are sampled by tomrl's continuous-batching decoder
  (:mod:`tomrl.training.rollouts`, ``rollout_engine``), which returns the sampled ids and their
  log-probabilities, each rollout seeded from its step and row, so that a resumed run samples what the uninterrupted one did;
  else by ``model.generate``. With ``stop_at_answer`` a rollout ends right after ``</answer>``;
  on a CPU with bf16 precision, rollouts are decoded by a bf16 copy of the weights.
- ``_get_per_token_logps_and_entropies`` and ``_prepare_inputs``: with ``share_prompt_forward``,
  each distinct prompt of a micro-batch runs through the model once for all its rollouts
  (:mod:`tomrl.training.shared_prompt`), and TRL's row shuffle keeps a prompt's rollouts together.
- ``_save_checkpoint``: checkpoints are written to a ``.partial`` folder and renamed into place; a
  write that fills the disk removes its partial folder and says so as an ``OSError`` (ENOSPC) naming
  the checkpoint (torch's writer reports it only as "iostream error").
- ``_run_epoch``: a run resumed from a checkpoint at ``max_steps`` trains no further step
  (transformers would train one past it before checking).

Built by :func:`tomrl.training.run.build_trainer`; run with ``tomrl train --config FILE``.
"""

from __future__ import annotations

import os
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch
from trl import GRPOTrainer
from trl.models import unwrap_model_for_generation
from trl.models.utils import disable_gradient_checkpointing

from tomrl.generation.base import cut_completion
from tomrl.io import PARTIAL_SUFFIX, disk_full, publish_folder
from tomrl.training.advantages import AdvantageInputs, approx_kl
from tomrl.training.algorithms import ALGORITHMS
from tomrl.training.checkpoints import keep_latest_checkpoints

ANSWER_STOP = "</answer>"


class TomrlGRPOTrainer(GRPOTrainer):
    """GRPOTrainer + REINFORCE++ (see the module docstring); ``train_config`` is a TrainConfig."""

    def __init__(self, *args: Any, train_config: Any, rewards: list, run_dir: str | Path, **kwargs: Any):
        self.train_config = train_config
        self.tomrl_rewards = rewards  # tomrl Reward objects, in TRL's reward_funcs order
        self.run_dir = Path(run_dir)
        self.sample_rows: list[dict] = []  # rollouts of the current step, drained by the logging callback
        self._last_rewards_per_func: torch.Tensor | None = None
        self._checkpoint_staging: Path | None = None
        super().__init__(*args, reward_funcs=rewards, **kwargs)

    # ------------------------------------------------------------------ prompts and rollouts

    def _tokenize_prompts(self, prompts: list):
        # tomrl renders each prompt with the chat template and the prefill already (tomrl.prompts);
        # tokenizing it with special tokens would add a second BOS on templates that start with one.
        if prompts and isinstance(prompts[0], str):
            return self.processing_class(text=prompts, add_special_tokens=False)["input_ids"], None, {}
        return super()._tokenize_prompts(prompts)

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        if not images and self._slot_sampler() is not None:
            return self._sample_with_slots(prompt_ids)
        own_path = self.train_config.stop_at_answer or self._cpu_bf16_rollouts
        if not own_path or self.use_vllm or self.use_transformers_continuous_batching or images:
            return super()._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations, has_tool_images)
        return self._generate_rollouts(prompt_ids), None

    def _slot_sampler(self):
        """The slot-decoder sampler of ``rollout_engine`` (None: ``model.generate`` / vLLM), decided on first use."""
        if not hasattr(self, "_slot_rollouts"):
            self._slot_rollouts = None
            engine = self.train_config.rollout_engine
            if engine == "transformers" or self.use_vllm:
                return None
            from tomrl.training.rollouts import SlotRollouts, slot_rollouts_unavailable

            reason = slot_rollouts_unavailable(self.accelerator.unwrap_model(self.model), self.args)
            if reason is None and self.is_fsdp_enabled:
                reason = "FSDP shards the weights the slot decoder reads"
            if reason is not None:
                if engine == "slots":
                    raise ValueError(f"rollout_engine=slots: {reason}; set rollout_engine to auto or transformers")
                if self.accelerator.is_main_process:
                    print(f"rollouts: model.generate, as {reason}")
                return None
            self._slot_rollouts = SlotRollouts(
                self._tokenizer,
                set(self.eos_token_ids),
                temperature=self.temperature,
                top_p=self.top_p,
                max_new_tokens=self.max_completion_length,
                stop=(ANSWER_STOP,) if self.train_config.stop_at_answer else (),
                seed=self.args.seed,
                # ZeRO-3 gathers the weights only inside unwrap_model_for_generation: build per call.
                reuse_within_step=not self.is_deepspeed_enabled,
            )
        return self._slot_rollouts

    def _unwrapped_for_generation(self):
        """The policy as TRL unwraps it for generation (DeepSpeed/FSDP gathering, no gradient checkpointing)."""
        return unwrap_model_for_generation(
            self.model_wrapped,
            self.accelerator,
            gather_deepspeed3_params=self.args.ds3_gather_for_generation,
            generation_kwargs=self.generation_kwargs,
            gradient_checkpointing_kwargs=self.args.gradient_checkpointing_kwargs,
        )

    def _sample_with_slots(self, prompt_ids: list[list[int]]):
        """Rollout ids and their sampling log-probabilities from the slot decoder, in prompt order.

        TRL keeps the log-probabilities as ``sampling_per_token_logps``, which its loss reads only
        for vLLM's importance-sampling correction (``vllm_importance_sampling_correction``, which
        applies with ``use_vllm`` alone, never to these slot rollouts) or an off-policy mask (not
        configured by tomrl): the old policy's log-probabilities of the loss stay TRL's own forward pass.
        """
        with self._unwrapped_for_generation() as unwrapped_model:
            completions = self._slot_rollouts.sample(
                self._rollout_model(unwrapped_model),
                prompt_ids,
                step=self.state.global_step,
                process_index=self.accelerator.process_index,
            )
        return [c.token_ids for c in completions], [c.logprobs for c in completions]

    @property
    def _cpu_bf16_rollouts(self) -> bool:
        # Under bf16 autocast a CPU casts every fp32 weight matrix to bf16 at every decoding step,
        # which costs more than the matmul itself for one token; decoding with a bf16 copy of the
        # weights avoids it (the copy is refreshed after each optimizer step). Not under DeepSpeed: its
        # module already holds 16-bit weights, and under ZeRO-3 transformers would build the copy partitioned.
        return self.train_config.precision == "bfloat16" and self.accelerator.device.type == "cpu" and not self.is_deepspeed_enabled

    def _rollout_model(self, unwrapped_model):
        """The model rollouts are sampled from: the policy, or its bf16 copy (see _cpu_bf16_rollouts)."""
        from accelerate.utils import is_peft_model

        if not self._cpu_bf16_rollouts or is_peft_model(unwrapped_model):
            return unwrapped_model
        if getattr(self, "_bf16_shadow", None) is None:
            from transformers import AutoModelForCausalLM

            # Built on the first step of every process, so also right after a resume has restored
            # the random state: its (discarded) random initialisation must not draw from that
            # state, or a resumed run would sample other rollouts than an uninterrupted one.
            with torch.random.fork_rng(devices=[]):
                self._bf16_shadow = AutoModelForCausalLM.from_config(unwrapped_model.config, dtype=torch.bfloat16).eval()
            self._bf16_shadow.generation_config = unwrapped_model.generation_config
            self._bf16_shadow_step = None
        if self._bf16_shadow_step != self.state.global_step:
            # A fresh copy of the current weights (load_state_dict casts them to bf16).
            self._bf16_shadow.load_state_dict(unwrapped_model.state_dict())
            self._bf16_shadow_step = self.state.global_step
        return self._bf16_shadow

    @torch.no_grad()
    def _generate_rollouts(self, prompt_ids: list[list[int]]) -> list[list[int]]:
        """``model.generate`` rollouts, ended after ``</answer>`` when ``stop_at_answer`` (else EOS or the budget)."""
        from trl.trainer.utils import pad

        device = self.accelerator.device
        tensors = [torch.tensor(ids) for ids in prompt_ids]
        input_ids = pad(tensors, padding_value=self._tokenizer.pad_token_id, padding_side="left").to(device)
        attention_mask = pad([torch.ones_like(t) for t in tensors], padding_value=0, padding_side="left").to(device)
        generation_config, extra = self.generation_config, {}
        if self.train_config.stop_at_answer:
            import copy

            generation_config = copy.deepcopy(self.generation_config)
            generation_config.stop_strings = [ANSWER_STOP]
            extra = {"tokenizer": self._tokenizer}  # generate needs it to match stop strings
        with self._unwrapped_for_generation() as unwrapped_model:
            model = self._rollout_model(unwrapped_model)
            output = model.generate(input_ids=input_ids, attention_mask=attention_mask, generation_config=generation_config, **extra)
        completions = output[:, input_ids.size(1) :].tolist()
        stop_text = ANSWER_STOP if self.train_config.stop_at_answer else None
        return [cut_completion(ids, set(self.eos_token_ids), self._tokenizer, stop_text) for ids in completions]

    # ------------------------------------------------------------------ the loss's forward pass

    def _shares_prompt_forward(self) -> bool:
        """Whether the loss runs each prompt once per micro-batch (decided on first use, said once)."""
        if not hasattr(self, "_share_prompt_forward"):
            from tomrl.training.shared_prompt import shared_prompt_unavailable

            reason = None
            if self.train_config.share_prompt_forward:
                reason = shared_prompt_unavailable(self.model, self.accelerator, self.args.gradient_checkpointing)
                if reason is not None and self.accelerator.is_main_process:
                    print(f"loss: one forward per rollout (TRL's), as {reason}")
            self._share_prompt_forward = self.train_config.share_prompt_forward and reason is None
        return self._share_prompt_forward

    def _get_per_token_logps_and_entropies(
        self, model, input_ids, attention_mask, logits_to_keep, batch_size=None, compute_entropy=False, compute_aux_loss=False, **extra
    ):
        multimodal = any(value is not None for value in extra.values())
        if self._shares_prompt_forward() and not multimodal and not compute_aux_loss:
            from tomrl.training.shared_prompt import shared_prompt_logps

            step = batch_size or input_ids.size(0)
            chunks = []
            for start in range(0, input_ids.size(0), step):
                rows = slice(start, start + step)
                shared = shared_prompt_logps(
                    model, input_ids[rows], attention_mask[rows], logits_to_keep, self.accelerator.autocast, compute_entropy
                )
                if shared is None:  # no two rows of this chunk share a prompt: TRL's forward
                    logps, entropies, _ = super()._get_per_token_logps_and_entropies(
                        model, input_ids[rows], attention_mask[rows], logits_to_keep, compute_entropy=compute_entropy
                    )
                    shared = (logps, entropies)
                chunks.append(shared)
            logps = torch.cat([c[0] for c in chunks], dim=0)
            entropies = torch.cat([c[1] for c in chunks], dim=0) if compute_entropy else None
            return logps, entropies, None
        return super()._get_per_token_logps_and_entropies(
            model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy, compute_aux_loss, **extra
        )

    def _prepare_inputs(self, generation_batch):
        if not self.model.training or not self._shares_prompt_forward():
            return super()._prepare_inputs(generation_batch)
        # TRL's training branch, with its row shuffle replaced by a shuffle of whole prompt groups, so
        # that a prompt's rollouts share a micro-batch (and its forward pass); text only.
        from trl.trainer.utils import split_tensor_dict

        from tomrl.training.shared_prompt import shuffle_prompt_groups

        generate_every = self.args.steps_per_generation * self.num_iterations
        if self._step % generate_every == 0 or self._buffered_inputs is None:
            batch = shuffle_prompt_groups(self._generate_and_score_completions(generation_batch))
            self._buffered_inputs = split_tensor_dict(batch, self.args.steps_per_generation)
        return self._buffered_inputs[self._step % self.args.steps_per_generation]

    # ------------------------------------------------------------------ rewards and metrics

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._last_rewards_per_func = rewards_per_func
        self._record_answer_metrics(inputs, completions, completion_ids_list)
        return rewards_per_func

    def _record_answer_metrics(self, inputs, completions, completion_ids_list) -> None:
        """Reward components, format rate, accuracy and per-rollout rows (gathered over processes)."""
        from accelerate.utils import gather_object

        mode = "train" if self.model.training else "eval"
        columns = {key: [row.get(key) for row in inputs] for key in inputs[0] if key not in ("prompt",)}
        per_reward = [reward.details(None, completions, **columns) for reward in self.tomrl_rewards]
        local_rows = []
        for index, (row, ids) in enumerate(zip(inputs, completion_ids_list)):
            details = [results[index] for results in per_reward]
            local_rows.append(
                {
                    "id": row.get("id"),
                    "order": row.get("order"),
                    "completion": completions[index],
                    "completion_tokens": len(ids),
                    "rewards": {d.reward: d.score for d in details},
                    "components": {f"{d.reward}/{k}": v for d in details for k, v in d.components.items()},
                    "format_ok": details[0].format_ok,
                    "correct": details[0].correct,
                    "extracted": details[0].extracted,
                }
            )
        rows = gather_object(local_rows)
        sums: dict[str, float] = defaultdict(float)
        for row in rows:
            for key, value in row["components"].items():
                sums[key] += value
        metrics = self._metrics[mode]
        for key, total in sums.items():
            metrics[f"reward_components/{key}"].append(total / len(rows))
        metrics["answer/format_rate"].append(sum(r["format_ok"] for r in rows) / len(rows))
        metrics["answer/accuracy"].append(sum(r["correct"] for r in rows) / len(rows))
        lengths = [r["completion_tokens"] for r in rows]
        metrics["tokens/generated"].append(float(sum(lengths)))
        if mode == "train" and self.accelerator.is_main_process and self.train_config.log_samples:
            step = self.state.global_step + 1  # these rollouts train the coming optimizer step
            for row in rows:
                row["step"] = step
            self.sample_rows.extend(rows)

    # ------------------------------------------------------------------ advantages

    def _generate_and_score_completions(self, inputs):
        mode = "train" if self.model.training else "eval"
        if self.train_config.dynamic_sampling and mode == "train":
            from tomrl.training.dynamic_sampling import sample_until_signal

            # Zero-signal groups replaced by fresh ones; GRPO advantages and the rewards below match the merged batch.
            output = sample_until_signal(self, inputs, super()._generate_and_score_completions)
        else:
            output = super()._generate_and_score_completions(inputs)
        trained_tokens = output["prompt_mask"].sum() + output["completion_mask"].sum()
        self._metrics[mode]["tokens/trained"].append(self.accelerator.gather(trained_tokens).sum().item())
        advantage_function = ALGORITHMS[self.train_config.algorithm].advantage_function()
        if advantage_function is None or mode != "train":
            return output
        output["advantages"] = advantage_function(self._advantage_inputs(output))
        return output

    def _advantage_inputs(self, output: dict) -> AdvantageInputs:
        """The batch for the algorithm's advantage function; with the KL in the reward, its log-probabilities too."""
        cfg = self.train_config
        rewards_per_func = self._last_rewards_per_func  # all processes' rows, in TRL's order
        weights = self.reward_weights.to(rewards_per_func.device).unsqueeze(0)
        rewards = torch.nan_to_num((rewards_per_func * weights).nansum(dim=1), nan=0.0)
        local_count = output["completion_ids"].size(0)
        start = self.accelerator.process_index * local_count
        mask = output["completion_mask"]
        if "tool_mask" in output:
            mask = mask * output["tool_mask"]
        logps = ref_logps = None
        kl_coef = cfg.kl_coef if cfg.puts_kl_in_reward else 0.0
        if kl_coef > 0.0:
            logps = output.get("old_per_token_logps")
            if logps is None:
                logps = self._sampling_policy_logps(output)
                output["old_per_token_logps"] = logps  # the ratio's denominator: the sampling policy
            ref_logps = output["ref_per_token_logps"]
            kl = approx_kl(logps, ref_logps, cfg.kl_estimator)
            totals = self.accelerator.reduce(torch.stack([(kl * mask).sum(), mask.sum().float()]), reduction="sum")
            self._metrics["train"]["kl"].append((totals[0] / totals[1].clamp(min=1.0)).item())
        return AdvantageInputs(
            rewards, mask, self.num_generations, slice(start, start + local_count), logps, ref_logps, kl_coef, cfg.kl_estimator, cfg.gamma,
            sum_across_processes=lambda tensor: self.accelerator.reduce(tensor, reduction="sum"),
        )

    @torch.no_grad()
    def _sampling_policy_logps(self, output: dict) -> torch.Tensor:
        input_ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
        attention_mask = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
        with disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs):
            logps, _, _ = self._get_per_token_logps_and_entropies(
                self.model,
                input_ids,
                attention_mask,
                output["completion_ids"].size(1),
                batch_size=self.args.per_device_train_batch_size,
            )
        return logps

    def _compute_loss(self, model, inputs):
        # With the KL in the reward the loss has no KL term. TRL adds beta * KL to the loss whenever
        # beta != 0, and beta must stay non-zero for TRL to build the reference model.
        if not self.train_config.puts_kl_in_reward:
            return super()._compute_loss(model, inputs)
        beta, self.beta = self.beta, 0.0
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self.beta = beta

    # ------------------------------------------------------------------ resuming and checkpoints

    def _run_epoch(self, *args: Any, **kwargs: Any):
        # transformers checks max_steps after each step, so a run resumed from its checkpoint at
        # max_steps (killed before writing final/) would train step max_steps + 1 first.
        if self.state.global_step >= self.state.max_steps > 0:
            self.control.should_training_stop = True
            return None
        return super()._run_epoch(*args, **kwargs)

    def _get_output_dir(self, trial) -> str:
        if self._checkpoint_staging is not None:
            return str(self._checkpoint_staging)
        return super()._get_output_dir(trial)

    def _save_checkpoint(self, model, trial) -> None:
        """Write checkpoint-N under a temporary folder and rename it into place (all or nothing)."""
        final_root = Path(self.args.output_dir)
        staging_root = final_root / ("staging" + PARTIAL_SUFFIX)
        if self.accelerator.is_main_process:
            shutil.rmtree(staging_root, ignore_errors=True)
        self.accelerator.wait_for_everyone()
        self._checkpoint_staging = staging_root
        name = f"checkpoint-{self.state.global_step}"
        try:
            super()._save_checkpoint(model, trial)
        except Exception as err:
            full = disk_full(err, staging_root)
            if self.accelerator.is_main_process:
                shutil.rmtree(staging_root, ignore_errors=True)  # the space it took; --resume would remove it anyway
            if full:
                raise OSError(full, os.strerror(full), str(final_root / name)) from err
            raise
        finally:
            self._checkpoint_staging = None
        self.accelerator.wait_for_everyone()
        if self.accelerator.is_main_process:
            publish_folder(staging_root / name, final_root / name)
            shutil.rmtree(staging_root, ignore_errors=True)
            keep_latest_checkpoints(self.run_dir, self.train_config.keep_checkpoints)
        self.accelerator.wait_for_everyone()

