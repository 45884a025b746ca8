#!/usr/bin/env bash
# The system tools the test suite needs, checked before it runs (npm's `pretest`: `npm test` runs this first; npm's
# `prestart` runs it with `start`: Java only, for `npm start`'s DynamoDB Local):
#   Java 17+   DynamoDB Local (or the JAVA environment variable: a java binary)
#   Chromium   the approval page's browser tests (or CHROMIUM_PATH: a Chromium binary)
#   spin, gcc  the model checks (test/proof/)
#   openssl    the gateway's artifact test (a certificate for its https upstream on loopback)
#   cfn-lint   the linter of every synthesized template (test/artifact/); a Python package, not in Debian
# What is missing is installed from Debian's packages when it can be (Debian or Ubuntu, as root); otherwise this
# stops at once with one sentence naming what to install and how, before any test runs.
# (The Node 22 of test/artifact/ is the npm registry's: the suite's global set-up installs it, see test/conformance/.)
set -euo pipefail

java_ok() {
  local java="${JAVA:-java}" version
  command -v "$java" >/dev/null 2>&1 || return 1
  # `java -version` prints e.g. `openjdk version "17.0.15" 2025-04-15` (or "1.8.0_392" for Java 8) on stderr.
  version="$("$java" -version 2>&1 | sed -n 's/.* version "\([0-9][0-9]*\)[."].*/\1/p' | head -n 1)"
  [ -n "$version" ] && [ "$version" -ge 17 ]
}
chromium_ok() {
  local chromium="${CHROMIUM_PATH:-/usr/bin/chromium}"
  [ -x "$chromium" ] || command -v "$chromium" >/dev/null 2>&1
}

# `start` (npm's `prestart`): only what `npm start` needs, Java for DynamoDB Local.
for_start=
who="The tests need" again="run the tests again"
if [ "${1:-}" = start ]; then for_start=1 who="npm start needs" again="run npm start again"; fi

missing_packages() {
  local missing=()
  java_ok || missing+=(openjdk-17-jre-headless)
  if [ -n "$for_start" ]; then
    echo "${missing[*]}"
    return
  fi
  chromium_ok || missing+=(chromium)
  command -v spin >/dev/null 2>&1 || missing+=(spin)
  command -v gcc >/dev/null 2>&1 || missing+=(gcc)
  command -v openssl >/dev/null 2>&1 || missing+=(openssl)
  echo "${missing[*]}"
}

missing="$(missing_packages)"
if [ -n "$missing" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing the system packages the tests need: $missing"
  # shellcheck disable=SC2086 # one word per package
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
  missing="$(missing_packages)"
fi
# cfn-lint is Python's (PyPI), which this script does not install: a pip here may not reach PyPI, or may not be the
# Python the user wants it in. Missing, it is named now rather than failing test/artifact/ halfway through the run.
cfn_lint=ok
[ -n "$for_start" ] || command -v cfn-lint >/dev/null 2>&1 || cfn_lint=

[ -z "$missing" ] && [ -n "$cfn_lint" ] && exit 0

if [ -n "$missing" ] && [ -z "$cfn_lint" ]; then
  echo "The tests need the system packages $missing and the Python package cfn-lint: install them (on Debian or Ubuntu: sudo apt-get update && sudo apt-get install -y $missing, and pip install cfn-lint (or pipx install cfn-lint) so that cfn-lint is on PATH; elsewhere their equivalents, with JAVA or CHROMIUM_PATH set to the binaries) and run the tests again." >&2
elif [ -n "$missing" ]; then
  echo "$who the system packages $missing: install them (on Debian or Ubuntu: sudo apt-get update && sudo apt-get install -y $missing; elsewhere their equivalents, with JAVA or CHROMIUM_PATH set to the binaries) and $again." >&2
else
  echo "The tests need cfn-lint, the CloudFormation linter (a Python package, in no Debian package): install it with pip install cfn-lint (or pipx install cfn-lint) so that cfn-lint is on PATH, and run the tests again." >&2
fi
exit 1
