#!/usr/bin/env bash
# Install gpu-remedy into ./.venv from the pinned lock file.
#   scripts/install.sh          runtime (what `remedy demo` needs)
#   scripts/install.sh --test   + test tools and the real servers the tests start (Debian packages)
# Needs only Python 3.11+ and apt. Prefect 3.9 pins a certifi newer than the registry serves, so the
# install goes through uv with overrides.txt (see docs/operations.md, "Install trap").
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
lock=requirements.lock
[ "${1:-}" = "--test" ] && lock=requirements-test.lock

if ! "$PY" -m uv --version >/dev/null 2>&1; then
  "$PY" -m pip install --quiet --disable-pip-version-check uv
fi
[ -x .venv/bin/python ] || "$PY" -m uv venv --quiet --python "$PY" .venv
"$PY" -m uv pip install --quiet --python .venv/bin/python --override overrides.txt -r "$lock"
"$PY" -m uv pip install --quiet --python .venv/bin/python --no-deps -e .

if [ "${1:-}" = "--test" ]; then
  # Real servers the integration tests start on loopback ports (never as services).
  need=()
  for pkg in postgresql prometheus prometheus-alertmanager prometheus-node-exporter chromium chromium-driver; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
  done
  command -v kubectl >/dev/null 2>&1 || need+=(kubernetes-client)
  if [ ${#need[@]} -gt 0 ]; then
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
fi
echo "gpu-remedy installed in .venv ($lock)"
