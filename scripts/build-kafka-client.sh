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
# instead, in place, and says nothing of the one it replaced. With `--keep-only` after it: builds for that
# Node.js into .cache/kafka-client/ alone and leaves node_modules as it is, so that the processes using
# it meanwhile are not disturbed (node-check.sh --prepare, in CI's background). Every build happens in a
# scratch copy of the package beside the cache, and is copied into the package from the cache.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PACKAGE="$ROOT/node_modules/@confluentinc/kafka-javascript"
NODEDIR="${1:-}"
KEEP_ONLY=0
[[ "${2:-}" == --keep-only ]] && KEEP_ONLY=1

# An install without it (a production install that copies the built addon in) has nothing to build.
[[ -d "$PACKAGE" ]] || exit 0
if [[ -z "$NODEDIR" ]] && node -e 'require(process.argv[1])' "$PACKAGE" 2>/dev/null; then exit 0; fi

mkdir -p "$ROOT/.cache"
node="$(command -v node)"
[[ -n "$NODEDIR" ]] && node="$NODEDIR/bin/node"
key="$("$node" -p 'require(process.argv[1] + "/package.json").version + "-abi" + process.versions.modules + "-" + process.platform + "-" + process.arch' "$PACKAGE")"
cache="$ROOT/.cache/kafka-client/$key"
log="$ROOT/.cache/kafka-client-build-$key.log"
built=(build/Release/confluent-kafka-javascript.node build/deps/librdkafka.so.1 build/deps/librdkafka++.so.1)
# The kept build into the package, if it loads there.
install_kept() {
  ((KEEP_ONLY)) && return 0
  (cd "$cache" && cp -P --parents "${built[@]}" "$PACKAGE/")
  "$node" -e 'require(process.argv[1])' "$PACKAGE" 2>/dev/null
}
if [[ -f "$cache/${built[0]}" ]]; then
  if install_kept; then
    echo "@confluentinc/kafka-javascript: the build kept in $cache" >&2
    exit 0
  fi
  rm -rf "$cache"
fi
echo "building librdkafka and @confluentinc/kafka-javascript from source for Node.js $("$node" --version) (about 2-3 minutes of CPU; log: $log)" >&2
started=$SECONDS
# The scratch copy lies under the repository, so that the build's own look-ups (node-addon-api) find
# the root's node_modules as they would from the package.
scratch="$cache.build/kafka-javascript"
rm -rf "$cache.build" && mkdir -p "$cache.build" && cp -a "$PACKAGE" "$scratch"
# node-pre-gyp runs the node-gyp that npm names in npm_config_node_gyp for the scripts it runs (the
# postinstall, npm rebuild); run by hand or by node-check.sh --prepare, npm's own copy.
if [[ -z "${npm_config_node_gyp:-}" ]]; then
  npm_config_node_gyp="$(dirname "$(readlink -f "$(command -v npm)")")/../node_modules/node-gyp/bin/node-gyp.js"
  export npm_config_node_gyp
fi
pre_gyp="$(node -p 'require.resolve("@mapbox/node-pre-gyp/bin/node-pre-gyp", { paths: [process.argv[1]] })' "$PACKAGE")"
# The headers of the Node.js that builds (include/node under its prefix): node-gyp would otherwise
# download them.
args=(install --build-from-source --update-binary
  "--nodedir=${NODEDIR:-$("$node" -p 'require("node:path").resolve(process.execPath, "../..")')}")
[[ -n "$NODEDIR" ]] && args+=("--target=$("$node" -p 'process.versions.node')")
# One make job for the binding (no JOBS=max): its rules need librdkafka's config.h, which the rule
# that configures librdkafka writes without declaring it, so a parallel make fails at once on a fresh
# tree ("No rule to make target '../deps/librdkafka/config.h'"). librdkafka's own make runs in parallel.
# For another Node.js, it first on PATH and its headers in npm_config_nodedir too, which node-gyp reads
# before --nodedir (the caller's names its own version's).
build_env=(CKJS_LINKING=dynamic)
[[ -n "$NODEDIR" ]] && build_env+=("PATH=$NODEDIR/bin:$PATH" "npm_config_nodedir=$NODEDIR")
if ! (cd "$scratch" && env "${build_env[@]}" "$node" "$pre_gyp" "${args[@]}") >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "build-kafka-client: building @confluentinc/kafka-javascript failed (above, the end of $log); it needs gcc, g++, make, python3 and the development files of OpenSSL and zlib (Debian: apt-get install build-essential python3 libssl-dev zlib1g-dev)" >&2
  exit 1
fi
if ! "$node" -e 'require(process.argv[1])' "$scratch" 2>>"$log"; then
  tail -n 20 "$log" >&2
  echo "build-kafka-client: the addon built in $scratch does not load (above, the end of $log)" >&2
  exit 1
fi
echo "built @confluentinc/kafka-javascript in $((SECONDS - started)) s" >&2
rm -rf "$cache.partial" && mkdir -p "$cache.partial"
(cd "$scratch" && cp -P --parents "${built[@]}" "$cache.partial/")
rm -rf "$cache" "$cache.build" && mv "$cache.partial" "$cache"
if ! install_kept; then
  echo "build-kafka-client: the addon built for $PACKAGE does not load there" >&2
  exit 1
fi
