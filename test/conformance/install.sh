#!/usr/bin/env bash
# The conformance suite and the Node 22 it needs, from the npm registry, into test/conformance/.tools (the machine's node
# is left alone). Pinned: a new suite version may add scenarios the baseline does not know.
set -euo pipefail
cd "$(dirname "$0")"
packages=(node@22.23.3 @modelcontextprotocol/conformance@0.1.16)
# Already installed (the test suite's global set-up runs this too, for test/artifact/'s Node 22): `npm ls`
# reads the folder only, where `npm install` would ask the registry again.
if [ -x .tools/node_modules/.bin/node ] && npm ls --prefix .tools "${packages[@]}" >/dev/null 2>&1; then
  exit 0
fi
mkdir -p .tools
[ -f .tools/package.json ] || echo '{"name":"conformance-tools","private":true}' > .tools/package.json
npm install --prefix .tools --no-audit --no-fund --no-save "${packages[@]}" >/dev/null
