"""Check that ``pip install 'tomrl[vllm]'`` resolves without changing torch, transformers or trl.

    .venv/bin/python scripts/check_vllm_extra.py        # in CI (.ci/run); needs PyPI, downloads no wheel

vLLM pins torch exactly and bounds transformers, so an unbounded ``vllm`` extra lets pip pick a vLLM
that replaces the environment's torch and downgrades the transformers tomrl pins (vllm 0.33 brought
torch 2.14 and transformers 5.20). This runs pip's resolver in dry-run mode for this checkout's
``[vllm]`` extra, in the interpreter that runs it, and fails when the plan would install (that is,
change) any of those packages, or would install no vLLM at all.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KEPT = ("torch", "transformers", "trl")  # tomrl's pins (torch: whatever build the set-up installed)


def planned_installs() -> dict[str, str]:
    """What ``pip install --dry-run REPO[vllm]`` would install: name -> version."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.json"
        command = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report", str(report), f"{REPO}[vllm]"]
        finished = subprocess.run(command, capture_output=True, text=True)
        if finished.returncode != 0:
            errors = [line for line in (finished.stdout + finished.stderr).splitlines() if line.startswith("ERROR")]
            sys.exit("check_vllm_extra: FAIL: pip cannot resolve tomrl[vllm] beside this environment (run "
                     f"`{sys.executable} -m pip install --dry-run '{REPO}[vllm]'` for the whole story):\n" + "\n".join(errors))
        plan = json.loads(report.read_text(encoding="utf-8"))
    return {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in plan["install"]}


def main() -> int:
    installs = planned_installs()
    moved = {name: installs[name] for name in KEPT if name in installs}
    if moved:
        changes = ", ".join(f"{name} -> {version}" for name, version in moved.items())
        print(f"check_vllm_extra: FAIL: pip install 'tomrl[vllm]' would change {changes}; narrow the vllm extra in pyproject.toml "
              "(and SUPPORTED_VLLM in src/tomrl/generation/vllm.py)", file=sys.stderr)
        return 1
    if "vllm" not in installs:
        print("check_vllm_extra: FAIL: the resolver planned no vllm (is the [vllm] extra still in pyproject.toml?)", file=sys.stderr)
        return 1
    print(f"check_vllm_extra: ok: tomrl[vllm] resolves to vllm {installs['vllm']} and leaves {', '.join(KEPT)} as installed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
