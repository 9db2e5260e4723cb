#!/usr/bin/env bash
# Builds the MCP Bundle (.mcpb) of kernel-mcp: manifest.json and the server binary, validated
# and packed with the official CLI (npm @anthropic-ai/mcpb, pinned by package-lock.json and
# installed into ./node_modules once), then read back with `mcpb info`.
#
#   mcpb/build.sh path/to/kernel-mcp OUT_DIR     (make mcpb)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="$(realpath "${1:?usage: build.sh path/to/kernel-mcp OUT_DIR}")"
out="$(mkdir -p "${2:?usage: build.sh path/to/kernel-mcp OUT_DIR}" && realpath "$2")"
cd "$here"

stamp=node_modules/.installed.stamp
if [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ]; then
  npm ci --no-audit --no-fund --loglevel=error
  touch "$stamp"
fi
mcpb="$here/node_modules/.bin/mcpb"

version="$(python3 -c 'import json; print(json.load(open("manifest.json"))["version"])')"
stage="$out/stage"
rm -rf "$stage"
mkdir -p "$stage/server"
cp manifest.json "$stage/"
cp ../LICENSE ../README.md "$stage/"
cp "$bin" "$stage/server/kernel-mcp"
chmod 0755 "$stage/server/kernel-mcp"

"$mcpb" validate "$stage/manifest.json"
bundle="$out/kernel-mcp-$version.mcpb"
rm -f "$bundle"
"$mcpb" pack "$stage" "$bundle"
"$mcpb" info "$bundle"
echo "bundle: $bundle"
