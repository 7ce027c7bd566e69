#!/usr/bin/env bash
# Install gpu-remedy into ./.venv from the pinned lock file.
#   scripts/install.sh          runtime (what `remedy demo` needs)
#   scripts/install.sh --test   + test tools and the real servers the tests start (Debian packages)
# Needs only Python 3.11+ and apt. The venv is created first and everything, uv included, goes inside it:
# Debian's and Ubuntu's /usr/bin/python3 refuse installs into themselves (PEP 668). Prefect 3.9 pins a
# certifi newer than the registry serves, so the install goes through uv with overrides.txt
# (docs/operations.md, "Install trap").
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
lock=requirements.lock
[ "${1:-}" = "--test" ] && lock=requirements-test.lock
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo

apt_install() {
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "install: $PY is not Python 3.11 or newer; set PYTHON=/path/to/python3.11+" >&2
  exit 2
fi
if [ ! -x .venv/bin/python ]; then
  # Debian/Ubuntu ship venv (ensurepip) as a separate package.
  if ! "$PY" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    ver=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
    apt_install "python${ver}-venv" || apt_install python3-venv
  fi
  "$PY" -m venv .venv
fi
VPY=.venv/bin/python
"$VPY" -m uv --version >/dev/null 2>&1 || "$VPY" -m pip install --quiet --disable-pip-version-check uv
# compiled once here: every process of the demo and the tests would otherwise compile Prefect on each import
# when PYTHONDONTWRITEBYTECODE is set (it is on the machine we measured: ~10 s of a 35 s receiver start).
# uv's own UV_COMPILE_BYTECODE=0 skips it (~27 CPU s on 2 cores): tests/test_install_script.py does.
UV_COMPILE_BYTECODE=${UV_COMPILE_BYTECODE:-1} \
  "$VPY" -m uv pip install --quiet --python "$VPY" --override overrides.txt -r "$lock"
"$VPY" -m uv pip install --quiet --python "$VPY" --no-deps -e .

if [ "${1:-}" = "--test" ]; then
  # Real servers the integration tests start on loopback ports (never as services).
  need=()
  for pkg in postgresql prometheus prometheus-alertmanager prometheus-node-exporter chromium chromium-driver; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
  done
  command -v kubectl >/dev/null 2>&1 || need+=(kubernetes-client)
  [ ${#need[@]} -eq 0 ] || apt_install "${need[@]}"
fi
echo "gpu-remedy installed in .venv ($lock)"
