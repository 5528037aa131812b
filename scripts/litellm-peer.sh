#!/usr/bin/env bash
# LiteLLM's proxy in a venv of its own, as the optional peer of bench/serve_load.py (--litellm).
# Never a dependency of podium: it lives outside the project's venv, at one pinned version.
#   scripts/litellm-peer.sh            # prints the path of its `litellm` command
set -euo pipefail
VERSION=${LITELLM_VERSION:-1.106.12}
VENV=${LITELLM_VENV:-$HOME/.cache/podium/bench/litellm-$VERSION}
PYTHON=${PYTHON:-python3}
if [ ! -x "$VENV/bin/litellm" ]; then
  "$PYTHON" -m venv "$VENV" >&2
  "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
  "$VENV/bin/python" -m pip install --quiet "litellm[proxy]==$VERSION" >&2
fi
echo "$VENV/bin/litellm"
