# System packages and services the test suite drives for real. Installs what is missing (needs root or sudo).
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

ensure_system_packages() {
  local missing=()
  command -v git >/dev/null || missing+=(git)
  if [ ${#missing[@]} -gt 0 ]; then
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

ensure_postgres() {
  if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
    echo "starting PostgreSQL"
    as_root pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
    for _ in $(seq 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
  fi
}
