#!/usr/bin/env bash
# Installs what cdc_assets needs on Debian 12: database servers (for the demo and tests), Java and the
# JDBC drivers Spark loads from files, then the package itself. Idempotent; `--no-pip` skips pip; `--bench` adds
# sysbench, the load generator of bench/verify.py (the tests do not need it).
set -euo pipefail
cd "$(dirname "$0")/.."

# postgresql-15-postgis-3: PostGIS targets of MySQL spatial columns, and PostGIS tables as sources (tests).
# gcc, pkg-config, libmariadb-dev: pip builds mysqlclient (the mysql-pipe extra) against MariaDB's C client.
packages=(mariadb-server mariadb-client postgresql postgresql-15-postgis-3 default-jre-headless libmariadb-java
          libpostgresql-jdbc-java gcc pkg-config libmariadb-dev)
if [[ " $* " == *" --bench "* ]]; then
  packages+=(sysbench)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing Debian packages: ${missing[*]}"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [[ " $* " != *" --no-pip "* ]]; then
  python -m pip install -q -e ".[dev]"
fi
