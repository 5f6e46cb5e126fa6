#!/usr/bin/env bash
# Runs the project on a second Node.js version of package.json's engines (.ci/run runs everything else
# on the first): native addons built for it (npm rebuild, and the Kafka client's addon by
# scripts/build-kafka-client.sh with that version's headers), the unit tier and, beside it, the distributed
# scenario over SASL_SSL (platform/src/kafka-security.e2e.test.ts, which also starts the test run's
# Postgres and Kafka), every process on that version; then the addons are put back for the Node.js that
# was on PATH before (the Kafka client's from the build kept in .cache/, a copy). No build of its own:
# tsc's output does not depend on the Node.js that runs it, and the unit tier compiles every source it
# tests with TypeScript on this version (ts-jest). With a folder as second argument, jest also
# writes each run's results there as JSON (.ci/run adds them up).
#
# `node-check.sh --prepare <version>` only fetches that Node.js and builds its Kafka client addon into
# .cache/kafka-client/, leaving node_modules as it is: .ci/run runs it in the background, on idle CPU
# only, while other steps use node_modules, so that the check itself finds the build kept.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ "${1:-}" == --prepare ]]; then
  NODE_HOME="$(bash "$ROOT/scripts/node-runtime.sh" "${2:?usage: node-check.sh --prepare <version>}")"
  exec bash "$ROOT/scripts/build-kafka-client.sh" "$NODE_HOME" --keep-only
fi
VERSION="${1:?usage: node-check.sh <version> [results folder]}"
RESULTS="${2:-}"
NODE_HOME="$(bash "$ROOT/scripts/node-runtime.sh" "$VERSION")"

cd "$ROOT"
rebuild() { npm rebuild --no-audit --no-fund >/dev/null; }
addon="$ROOT/node_modules/@confluentinc/kafka-javascript/build/Release/confluent-kafka-javascript.node"
cp "$addon" "$ROOT/.cache/kafka-client-addon.node"
trap 'rebuild; cp "$ROOT/.cache/kafka-client-addon.node" "$addon"' EXIT
(
  export PATH="$NODE_HOME/bin:$PATH" npm_config_nodedir="$NODE_HOME"
  echo "node $(node --version)"
  rebuild
  bash "$ROOT/scripts/build-kafka-client.sh" "$NODE_HOME"
  major="${VERSION%%.*}"
  unit=(--selectProjects unit)
  e2e=(platform/src/kafka-security.e2e.test.ts --selectProjects e2e)
  if [[ -n "$RESULTS" ]]; then
    unit+=(--json "--outputFile=$RESULTS/node$major-unit.json")
    e2e+=(--json "--outputFile=$RESULTS/node$major-e2e.json")
  fi
  # The unit tier beside the end-to-end file, niced so that the file's processes come first; its output
  # follows the file's.
  export NODE_OPTIONS=--experimental-vm-modules
  nice -n 10 node node_modules/jest/bin/jest.js "${unit[@]}" >"$ROOT/.cache/node$major-unit.log" 2>&1 &
  unit_run=$!
  e2e_failed=0
  node node_modules/jest/bin/jest.js "${e2e[@]}" || e2e_failed=1
  unit_failed=0
  wait "$unit_run" || unit_failed=1
  cat "$ROOT/.cache/node$major-unit.log"
  ((e2e_failed == 0 && unit_failed == 0))
)
