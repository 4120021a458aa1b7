# System packages and services the test suite drives for real. Installs what is missing (needs root or sudo).
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

ensure_system_packages() {
  local missing=()
  command -v git >/dev/null || missing+=(git)
  # The browser test drives Debian's chromium through Playwright (no Playwright-downloaded browsers).
  [ -x /usr/bin/chromium ] || missing+=(chromium)
  # SAML sign-in (pysaml2) signs and verifies XML with the xmlsec1 binary.
  command -v xmlsec1 >/dev/null || missing+=(xmlsec1)
  # Real MCP clients and a real OpenID Provider come from the npm registry; the tests need them, never skip.
  command -v npm >/dev/null || missing+=(nodejs npm)
  # bench/codenav_c_bench.py's ground truth (GNU Global), run in its small mode by tests/bench.
  command -v gtags >/dev/null || missing+=(global)
  if [ ${#missing[@]} -gt 0 ]; then
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  ensure_mcp_test_clients
  ensure_oidc_test_provider
}

ensure_postgres() {
  if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
    echo "starting PostgreSQL"
    as_root pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
    for _ in $(seq 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
  fi
}

# Real MCP clients for the MCP tests (MCP Inspector CLI, TypeScript SDK), pinned by tests/mcp_clients/package-lock.json.
ensure_mcp_test_clients() {
  local dir="$(dirname "${BASH_SOURCE[0]}")/../../tests/mcp_clients"
  if [ ! -d "$dir/node_modules/@modelcontextprotocol/inspector" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  fi
}

# A real OpenID Provider (npm oidc-provider) for the OpenID Connect sign-in tests, pinned by tests/oidc/package-lock.json.
ensure_oidc_test_provider() {
  local dir="$(dirname "${BASH_SOURCE[0]}")/../../tests/oidc"
  if [ ! -d "$dir/node_modules/oidc-provider" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  fi
}
