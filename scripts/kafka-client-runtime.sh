#!/usr/bin/env bash
# Puts the Kafka client's built native part (scripts/build-kafka-client.sh) into a production install
# made with `npm ci --omit=dev --ignore-scripts`, and removes the sources it was built from: what runs
# is the addon and librdkafka's shared libraries, linked to the system's libssl3 and zlib. Used by
# docker/Dockerfile and platform/src/production-install.e2e.test.ts, the same way.
#   scripts/kafka-client-runtime.sh <the built repository> <the production install>
set -euo pipefail
package=node_modules/@confluentinc/kafka-javascript
from="$1/$package"
to="$2/$package"
rm -rf "$to/deps" "$to/src" "$to/build"
mkdir -p "$to/build/Release" "$to/build/deps"
cp "$from/build/Release/confluent-kafka-javascript.node" "$to/build/Release/"
cp -P "$from"/build/deps/librdkafka*.so* "$to/build/deps/"
# Without their symbols (librdkafka.so.1: 14 MB to about 3).
strip --strip-unneeded "$to"/build/Release/*.node "$to"/build/deps/librdkafka*.so.1
