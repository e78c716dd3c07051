"""RL training on TRL: GRPO and REINFORCE++, configs, logging, checkpoints."""
