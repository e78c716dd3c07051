"""The keys tomrl's ``configs/accelerate/*.yaml`` files use, typed, so a typo fails in a test.

These files are ``accelerate launch --config_file`` configs (accelerate reads them itself); this
class only lets tomrl's config test check them like every other shipped config:

    accelerate launch --config_file configs/accelerate/deepspeed_zero3_offload.yaml -m tomrl train --config FILE

An accelerate key that none of tomrl's files uses yet must be added here before a file uses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tomrl.config import setting


@dataclass(frozen=True)
class DeepSpeedSettings:
    zero_stage: Literal[0, 1, 2, 3] = setting(2, help="ZeRO stage: 2 shards optimizer states and gradients, 3 also parameters")
    offload_optimizer_device: Literal["none", "cpu", "nvme"] = setting("none", help="where optimizer states live")
    offload_param_device: Literal["none", "cpu", "nvme"] = setting("none", help="where parameters live (ZeRO-3)")
    zero3_init_flag: bool = setting(False, help="build the model already sharded (ZeRO-3)")
    zero3_save_16bit_model: bool = setting(False, help="gather a 16-bit model when saving (ZeRO-3)")
    deepspeed_multinode_launcher: Literal["standard", "pdsh", "openmpi", "mvapich", "mpich"] = setting(
        "standard", help="launcher across machines"
    )


@dataclass(frozen=True)
class AccelerateConfig:
    compute_environment: Literal["LOCAL_MACHINE"] = setting("LOCAL_MACHINE", help="where the job runs")
    distributed_type: Literal["NO", "MULTI_GPU", "DEEPSPEED", "FSDP"] = setting("MULTI_GPU", help="parallelism backend")
    deepspeed_config: DeepSpeedSettings | None = setting(None, help="DeepSpeed plugin settings (distributed_type DEEPSPEED)")
    num_processes: int = setting(1, help="processes (GPUs) in all")
    num_machines: int = setting(1, help="machines")
    machine_rank: int = setting(0, help="rank of this machine")
    mixed_precision: Literal["no", "fp16", "bf16"] = setting("bf16", help="autocast precision")
    downcast_bf16: Literal["no", "yes"] = setting("no", help="TPU only")
    gpu_ids: str | None = setting(None, help="GPUs to use ('all' or '0,1,2,3')")
    main_training_function: str = setting("main", help="accelerate's entry-point name (unused with -m)")
    rdzv_backend: Literal["static", "c10d"] = setting("static", help="rendezvous backend")
    same_network: bool = setting(True, help="machines share a network")
    use_cpu: bool = setting(False, help="force CPU")

    def __post_init__(self) -> None:
        if self.num_processes < 1 or self.num_machines < 1:
            raise ValueError("num_processes and num_machines must be >= 1")
        if (self.distributed_type == "DEEPSPEED") != (self.deepspeed_config is not None):
            raise ValueError("deepspeed_config goes with distributed_type DEEPSPEED (and only with it)")
