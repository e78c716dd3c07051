"""The typed settings of the engines that read their own config section (``openai:``, ``vllm:``).

They live beside the engines (not in :mod:`tomrl.evaluation.config`) so that the engine registry
(:mod:`tomrl.generation.registry`) can name each engine's settings type without importing the
evaluation package; :class:`tomrl.evaluation.config.EvalConfig` embeds them as ``cfg.openai`` and
``cfg.vllm``. No torch, vLLM or HTTP code is imported here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from tomrl.config import setting
from tomrl.io import looks_like_a_key


@dataclass(frozen=True)
class OpenAISettings:
    """How to reach an OpenAI-compatible server (engine: openai)."""

    base_url: str = setting("http://127.0.0.1:8000/v1", help="server base URL, up to and including /v1")
    api_key_env: str = setting(
        "OPENAI_API_KEY",
        help="name of the environment variable holding the API key (the key itself is never read from a file, "
        "written anywhere or logged); unset variable = no Authorization header",
    )
    api: Literal["chat", "completions"] = setting(
        "chat",
        help="chat: send the prompt's messages to /chat/completions (the server applies its chat template; a "
        "prefill such as <think> cannot be sent, so answers are scored without one); completions: send the "
        "locally rendered prompt text, prefill included, to /completions (needs the model's tokenizer here)",
    )
    tokenizer: str | None = setting(
        None, help="completions API only: tokenizer (hub id or path) whose chat template renders prompts; null = the model"
    )
    timeout_s: float = setting(120.0, help="seconds to wait for one HTTP response")
    max_retries: int = setting(5, help="retries of a failed request (connection errors, HTTP 408/409/429/5xx)")
    backoff_s: float = setting(1.0, help="first retry delay in seconds; doubles at each retry (with jitter), capped at 60")
    concurrency: int = setting(8, help="requests in flight at once")

    def __post_init__(self) -> None:
        if self.timeout_s <= 0:
            raise ValueError(f"openai.timeout_s must be > 0, got {self.timeout_s}")
        if self.max_retries < 0:
            raise ValueError(f"openai.max_retries must be >= 0, got {self.max_retries}")
        if self.concurrency < 1:
            raise ValueError(f"openai.concurrency must be >= 1, got {self.concurrency}")
        if looks_like_a_key(self.api_key_env) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.api_key_env):
            # Never echo the value: it may be the key itself.
            raise ValueError(
                "openai.api_key_env must name the environment variable that holds the key (e.g. OPENAI_API_KEY), "
                "not the key itself; the value given is not a variable name and is not shown"
            )


@dataclass(frozen=True)
class VLLMSettings:
    """vLLM options (engine: vllm)."""

    gpu_memory_utilization: float = setting(0.9, help="fraction of GPU memory vLLM may take")
    tensor_parallel_size: int = setting(1, help="GPUs to split the model over")
    max_model_len: int | None = setting(None, help="context length vLLM reserves (null = the model's)")
