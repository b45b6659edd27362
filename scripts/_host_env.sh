# Sourced by the scripts: a host virtualenv (.venv) with dlperf installed in editable mode.
# The host env holds dlperf and its light dependencies only; every framework gets its own
# isolated env, built by dlperf itself on first use (under ~/.cache/dlperf/envs).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY="${DLPERF_HOST_PYTHON:-python3}"
if [[ ! -x .venv/bin/python ]] || ! .venv/bin/python -c "import dlperf" 2>/dev/null \
    || [[ pyproject.toml -nt .venv/.installed ]]; then
  echo "== setting up .venv (dlperf and its host dependencies) =="
  "$PY" -m venv .venv
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[test,docs]"
  touch .venv/.installed
fi
export PATH="$PWD/.venv/bin:$PATH"
