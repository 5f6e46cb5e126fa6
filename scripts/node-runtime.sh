#!/usr/bin/env bash
# Prints the folder of Node.js <version> for this machine, fetching it first when .cache/ has not got it:
# the npm registry's node-linux-<arch> package (the binary the `node` package installs; its headers
# too, which native addons build against offline with npm_config_nodedir). CI runs on the versions
# package.json's engines names (.ci/run), whatever Node.js the machine has.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="${1:?usage: node-runtime.sh <version>}"
HOME_DIR="$ROOT/.cache/node-$VERSION"

case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64) arch=arm64 ;;
  *) echo "node-runtime: no node-linux package for $(uname -m)" >&2; exit 1 ;;
esac
if [[ ! -x "$HOME_DIR/bin/node" ]]; then
  echo "fetching node-linux-$arch@$VERSION from the npm registry into $HOME_DIR" >&2
  mkdir -p "$ROOT/.cache"
  tarball="$(cd "$ROOT/.cache" && npm pack "node-linux-$arch@$VERSION" --silent)"
  rm -rf "$HOME_DIR.partial" && mkdir -p "$HOME_DIR.partial"
  tar xzf "$ROOT/.cache/$tarball" -C "$HOME_DIR.partial" --strip-components=1
  rm "$ROOT/.cache/$tarball"
  mv "$HOME_DIR.partial" "$HOME_DIR"
fi
echo "$HOME_DIR"
