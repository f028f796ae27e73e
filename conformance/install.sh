#!/usr/bin/env bash
# Installs the non-Python clients of the conformance suite (idempotent; run as root on Debian):
#   - kcat from Debian (package "kcat"; older releases call it "kafkacat"),
#   - Java 17 from Debian (openjdk-17-jre-headless) when `java` is missing: PySpark (the `spark`
#     extra) runs its tests on a local JVM,
#   - kafkajs 2.2.4 and its snappy/lz4/zstd codecs (pure JS/wasm, from npm) into
#     conformance/drivers/node/node_modules, exactly as pinned by package-lock.json.
# The Python clients come with `pip install -e .[test]`.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if ! command -v kcat >/dev/null 2>&1 && ! command -v kafkacat >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  if apt-cache show kcat >/dev/null 2>&1; then PKG=kcat; else PKG=kafkacat; fi
  $SUDO apt-get install -y -q --no-install-recommends "$PKG"
fi
(command -v kcat || command -v kafkacat) >/dev/null

if ! command -v java >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends openjdk-17-jre-headless
fi
echo "java: $(java -version 2>&1 | head -1)"
echo "kcat: $( (kcat -V 2>/dev/null || kafkacat -V) | grep -m1 Version)"

cd "$HERE/drivers/node"
if [ ! -d node_modules/kafkajs ] || ! npm ls --omit=dev >/dev/null 2>&1; then
  npm ci --no-audit --no-fund --loglevel=error
fi
echo "kafkajs: $(node -p 'require("kafkajs/package.json").version')"
