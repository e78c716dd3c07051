"""Checks of a training config's GPU path that fail in seconds, before any model or data loads.

    from tomrl.training.preflight import preflight
    preflight(cfg)        # ConfigError, one line naming the fix, when the run cannot start

``tomrl train`` runs it first. With ``use_vllm`` the rollouts need a vLLM release that TRL 1.16 and
tomrl's pins support (``pip install 'tomrl[vllm]'``) and a CUDA GPU, in both ``vllm_mode``s: the
training process drives the colocated engine, or talks to ``trl vllm-serve`` through vLLM's client
and syncs weights to it over NCCL. Without the check, the first sign is TRL's ImportError (or
vLLM's CUDA error) after the policy and the reference model have loaded.
"""

from __future__ import annotations

from tomrl.config import ConfigError
from tomrl.generation.vllm import require_vllm
from tomrl.training.config import TrainConfig


def preflight(cfg: TrainConfig) -> None:
    """Raise ConfigError when ``cfg`` asks for a GPU path this machine cannot run, or for a logger whose
    package is missing (transformers' callback would fail only when the trainer is built)."""
    if cfg.use_vllm:
        require_vllm("use_vllm=true", alternative="otherwise set use_vllm=false (rollouts from transformers)")
    missing = [name for name in cfg.report_to if name != "tensorboard" and name not in available_reporters()]
    if missing:
        raise ConfigError(
            f"key 'report_to': {', '.join(missing)} asked for, but its package is not installed here "
            f"(pip install {' '.join(REPORTER_PACKAGES.get(name, name) for name in missing)}), or drop it from report_to"
        )


# The pip package of an integration, where its name differs.
REPORTER_PACKAGES = {"azure_ml": "azureml-core", "comet_ml": "comet-ml", "neptune": "neptune", "kubeflow": "kubeflow"}


def available_reporters() -> list[str]:
    """The reporting integrations whose packages are installed (transformers' own check)."""
    from transformers.integrations import get_available_reporting_integrations

    return list(get_available_reporting_integrations())
