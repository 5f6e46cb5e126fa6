#!/usr/bin/env bash
# Builds the native part of @confluentinc/kafka-javascript (librdkafka and its Node.js binding) from
# the sources in its npm package, linked against the system's OpenSSL and zlib (CKJS_LINKING=dynamic):
# its install script would otherwise download a prebuilt binary from outside the npm registry, or,
# failing that, download OpenSSL's and zlib's sources to link them in. package.json's allowScripts
# turns that script off (npm 11) and `npm ci` runs this one instead, as the root's postinstall; with an
# older npm, which runs the package's own script, set CKJS_LINKING=dynamic in the environment
# (docker/Dockerfile does) and this finds the addon built.
#
# Needs gcc, g++, make, python3, and Debian's libssl-dev and zlib1g-dev (on Debian/Ubuntu:
# apt-get install build-essential python3 libssl-dev zlib1g-dev), and the Node.js headers, which
# node-gyp takes from the Node.js installation (include/node) or from `--nodedir`. About 2-3 minutes of
# CPU; nothing is done when the addon is there and loads. What it builds (the addon and librdkafka's
# shared libraries, about 17 MB) is kept in .cache/kafka-client/, keyed by the package's version and
# the Node.js ABI, and copied in by the next install instead of building again.
#
# With a folder as $1 (another Node.js version's, as scripts/node-check.sh passes it): builds for that Node.js
# instead, in place, and says nothing of the one it replaced.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PACKAGE="$ROOT/node_modules/@confluentinc/kafka-javascript"
NODEDIR="${1:-}"

# An install without it (a production install that copies the built addon in) has nothing to build.
[[ -d "$PACKAGE" ]] || exit 0
if [[ -z "$NODEDIR" ]] && node -e 'require(process.argv[1])' "$PACKAGE" 2>/dev/null; then exit 0; fi

mkdir -p "$ROOT/.cache"
log="$ROOT/.cache/kafka-client-build.log"
node="$(command -v node)"
[[ -n "$NODEDIR" ]] && node="$NODEDIR/bin/node"
key="$("$node" -p 'require(process.argv[1] + "/package.json").version + "-abi" + process.versions.modules + "-" + process.platform + "-" + process.arch' "$PACKAGE")"
cache="$ROOT/.cache/kafka-client/$key"
built=(build/Release/confluent-kafka-javascript.node build/deps/librdkafka.so.1 build/deps/librdkafka++.so.1)
if [[ -f "$cache/${built[0]}" ]]; then
  (cd "$cache" && cp -P --parents "${built[@]}" "$PACKAGE/")
  if "$node" -e 'require(process.argv[1])' "$PACKAGE" 2>/dev/null; then
    echo "@confluentinc/kafka-javascript: the build kept in $cache" >&2
    exit 0
  fi
  rm -rf "$cache"
fi
echo "building librdkafka and @confluentinc/kafka-javascript from source for Node.js $("$node" --version) (about 2-3 minutes of CPU; log: $log)" >&2
started=$SECONDS
pre_gyp="$(node -p 'require.resolve("@mapbox/node-pre-gyp/bin/node-pre-gyp", { paths: [process.argv[1]] })' "$PACKAGE")"
# The headers of the Node.js that builds (include/node under its prefix): node-gyp would otherwise
# download them.
args=(install --build-from-source --update-binary
  "--nodedir=${NODEDIR:-$("$node" -p 'require("node:path").resolve(process.execPath, "../..")')}")
[[ -n "$NODEDIR" ]] && args+=("--target=$("$node" -p 'process.versions.node')")
# One make job for the binding (no JOBS=max): its rules need librdkafka's config.h, which the rule
# that configures librdkafka writes without declaring it, so a parallel make fails at once on a fresh
# tree ("No rule to make target '../deps/librdkafka/config.h'"). librdkafka's own make runs in parallel.
if ! (cd "$PACKAGE" && CKJS_LINKING=dynamic "$node" "$pre_gyp" "${args[@]}") >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "build-kafka-client: building @confluentinc/kafka-javascript failed (above, the end of $log); it needs gcc, g++, make, python3 and the development files of OpenSSL and zlib (Debian: apt-get install build-essential python3 libssl-dev zlib1g-dev)" >&2
  exit 1
fi
echo "built @confluentinc/kafka-javascript in $((SECONDS - started)) s" >&2
rm -rf "$cache.partial" && mkdir -p "$cache.partial"
(cd "$PACKAGE" && cp -P --parents "${built[@]}" "$cache.partial/")
rm -rf "$cache" && mv "$cache.partial" "$cache"
