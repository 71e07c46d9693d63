#!/usr/bin/env bash
# The system packages the test suite's real servers need: headless Chromium (the HTML report and
# the history dashboard are rendered in it) and PostgreSQL's server binaries (the history store's
# tests start a throwaway server on loopback). Installed with apt-get where it is available and we
# are root; elsewhere it says what to install. The tests that need them fail without them.
set -euo pipefail
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if [ -z "${GPUPERF_TEST_POSTGRES:-}" ] && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  missing+=(postgresql)
fi
[ ${#missing[@]} -eq 0 ] && exit 0
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
  echo "setup: installing ${missing[*]} (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup: ${missing[*]} not installed; the tests that need them will fail (Debian: apt-get install ${missing[*]})" >&2
fi
