"""A stdio MCP server with one tool, `meta`, that answers with the `_meta` of the request that
called it (as JSON text): how tests/it/telemetry_context.rs sees the trace context the broker
passes on to the servers it calls. Standard library only; newline-delimited JSON-RPC."""

import json
import sys


def answer(msg):
    method = msg.get("method")
    params = msg.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "meta-echo", "version": "1"},
        }
    if method == "tools/list":
        schema = {"type": "object", "properties": {}}
        return {"tools": [{"name": "meta", "description": "The request's _meta", "inputSchema": schema}]}
    if method == "tools/call":
        text = json.dumps(params.get("_meta") or {})
        return {"content": [{"type": "text", "text": text}]}
    if method == "ping":
        return {}
    return None


for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if "id" not in msg or "method" not in msg:
        continue  # a notification or a response
    result = answer(msg)
    if result is None:
        reply = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no such method"}}
    else:
        reply = {"jsonrpc": "2.0", "id": msg["id"], "result": result}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
