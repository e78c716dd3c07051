"""The rewards inside a real TRL GRPO step (tiny random model, CPU): TRL accepts them, names them,
and their logging hooks reach the trainer's metrics."""

from __future__ import annotations

import pytest

from tomrl.prompts import render_prompt
from tomrl.rewards.functions import make_reward
from tomrl.schema import Example

STORY = "1 Anna and Ben entered the kitchen.\n2 The apple is in the red_box.\n3 Ben exited the kitchen.\n4 Anna moved the apple to the blue_box."


@pytest.mark.timeout(300)
def test_one_grpo_step_with_tomrl_rewards(tiny_model_dir, tmp_path):
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    example = Example(
        id="a", source="tomrl-hitom", split="train", story=STORY, question="Where does Ben really think the apple is?",
        answer="red_box", order=1, question_type="first_order", deception=False, story_length=1, story_id="s",
    )
    row = {"prompt": render_prompt(example, tokenizer), "answer": example.answer, "story": example.story, "source": example.source}
    args = GRPOConfig(
        output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4, num_generations=4, max_completion_length=8,
        report_to=[], logging_steps=1, use_cpu=True, save_strategy="no",
    )
    trainer = GRPOTrainer(
        model=str(tiny_model_dir),
        reward_funcs=[make_reward("strict"), make_reward("paper_b"), make_reward("fidelity")],
        args=args,
        train_dataset=Dataset.from_list([row] * 4),
        processing_class=tokenizer,
    )
    trainer.train()
    assert trainer.reward_func_names == ["strict", "paper_b", "fidelity"]
    logged = next(entry for entry in trainer.state.log_history if "rewards/strict/mean" in entry)
    # 8 random tokens never make a well-formed answer: strict −3, paper_b 0; no belief statement: fidelity 0.
    assert logged["rewards/strict/mean"] == -3.0 and logged["rewards/paper_b/mean"] == 0.0
    assert logged["rewards/fidelity/mean"] == 0.0
    assert logged["strict/format_ok_rate"] == 0.0 and "fidelity/correct_rate" in logged
