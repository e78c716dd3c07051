"""One process of the ZeRO-3 save test (tests/training/test_zero3_save.py), started by torchrun.

    python -m torch.distributed.run --nproc_per_node 2 tests/training/zero3_worker.py RUN_DIR PRECISION

Trains the smoke config for two steps with a reward that varies between random completions.
"""

from __future__ import annotations

import sys

from tests.training.test_train_smoke import VowelShareReward
from tomrl.config import load_config
from tomrl.training.config import TrainConfig
from tomrl.training.run import end_distributed, train

if __name__ == "__main__":
    cfg = load_config(TrainConfig, "configs/train/smoke_cpu.yaml", [
        f"run_dir={sys.argv[1]}", "max_steps=2", "rollouts_per_prompt=4", "micro_batch_size=2", "max_completion_length=8",
        "eval.every_steps=1", "eval.keep_best=true", "progress=false", f"precision={sys.argv[2]}", "save_every=10",
        "learning_rate=1.0e-3",
    ])
    train(cfg, rewards=[VowelShareReward(prefill="<think>")])
    end_distributed()
