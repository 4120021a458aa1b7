# Creates .venv and installs codewell into it (with the dev extras when asked); idempotent and quiet.
ensure_venv() {
  local extras="${1:-}"
  local python="${PYTHON:-python3}"
  if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "error: codewell needs Python 3.11 or newer as \`$python\` (set PYTHON=...)" >&2
    exit 1
  fi
  if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
  fi
  local stamp=".venv/.installed${extras:+-$extras}"
  # Reinstall when the dependencies or the native module's sources change (pip builds search/_scan.c).
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ] \
    || [ src/codewell/search/_scan.c -nt "$stamp" ]; then
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".${extras:+[$extras]}"
    touch "$stamp"
  fi
}
