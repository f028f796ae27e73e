#!/usr/bin/env bash
# Installs the non-Python clients of the conformance suite (idempotent), on Debian:
#   - kcat from Debian (package "kcat"; older releases call it "kafkacat"),
#   - Java 17 (openjdk-17-jre-headless) from Debian when `java` is missing, for PySpark's JVM (the
#     `spark` extra's tests; "spark" in MINIBROKER_CLIENTS),
#   - chromium and chromium-driver from Debian when missing, for the web console's browser tests
#     ("console" in MINIBROKER_CLIENTS),
#   - Node.js and npm from Debian when missing, then kafkajs 2.2.4 and its snappy/lz4/zstd codecs
#     (pure JS/wasm, from npm) into conformance/drivers/node/node_modules, as package-lock.json pins.
# Missing Debian packages are installed with apt-get as root, or through sudo; when neither works
# it prints ONE line naming what to install and exits 1. MINIBROKER_CLIENTS (see README) leaves
# out the clients not selected, e.g. MINIBROKER_CLIENTS=python needs nothing from here.
# The Python clients come with `pip install -e '.[test]'`.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

wants() {   # is client $1 selected by MINIBROKER_CLIENTS (unset or "all": every client)?
  local sel=",${MINIBROKER_CLIENTS:-all},"
  sel="${sel// /}"
  [[ "$sel" == *",all,"* || "$sel" == *",$1,"* ]]
}

missing=()      # Debian packages to install
if wants kcat && ! command -v kcat >/dev/null 2>&1 && ! command -v kafkacat >/dev/null 2>&1; then
  missing+=(kcat)
fi
if wants kafkajs; then
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
fi
if wants spark && ! command -v java >/dev/null 2>&1; then
  missing+=(openjdk-17-jre-headless)
fi
# The web console's browser tests (tests/console): headless Chromium and its driver, from Debian.
if wants console; then
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
fi

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then SUDO=()
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO=(sudo -n)
  else SUDO=(none)
  fi
  if [ "${SUDO[*]}" = none ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "conformance/install.sh: missing ${missing[*]}: install them (Debian: sudo apt-get install ${missing[*]}), or run only the Python clients with MINIBROKER_CLIENTS=python" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -q
  if [[ " ${missing[*]} " == *" kcat "* ]] && ! apt-cache show kcat >/dev/null 2>&1; then
    missing=("${missing[@]/kcat/kafkacat}")
  fi
  "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if wants kcat; then
  echo "kcat: $( (kcat -V 2>/dev/null || kafkacat -V) | grep -m1 Version)"
fi
if wants spark; then
  echo "java: $(java -version 2>&1 | head -1)"
fi
if wants console; then
  echo "chromium: $(chromium --version 2>/dev/null | head -1)"
fi
if wants kafkajs; then
  cd "$HERE/drivers/node"
  if [ ! -d node_modules/kafkajs ] || ! npm ls --omit=dev >/dev/null 2>&1; then
    npm ci --no-audit --no-fund --loglevel=error
  fi
  echo "kafkajs: $(node -p 'require("kafkajs/package.json").version')"
fi
