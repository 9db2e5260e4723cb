#!/usr/bin/env python3
"""Reference figures for the Kernel Gateway rows of `make bench`: a plain Python client of the
same gateway, with `urllib` for REST and `websockets` (its sync client) for the channels.

Prints one JSON object on stdout (progress goes to stderr). examples/bench/gateway.rs starts
the gateway, runs this with `.venv-gw/bin/python`, then runs kernel-mcp on the same gateway.

    .venv-gw/bin/python bench/gateway_ref.py --url http://127.0.0.1:PORT --token T --n 200

What is measured (all wall-clock, milliseconds):
  start_ms    POST /api/kernels, open the channels websocket, then send kernel_info_request
              until a kernel_info_reply comes: start -> ready, for `--starts` kernels.
  execute_ms  execute("1+1") round trips on one kernel: send execute_request, then wait for
              both the shell execute_reply and the iopub status:idle parented to it (the same
              definition of "done" kernel-mcp uses). `--warmup` runs are discarded.
The websocket uses the JSON framing (no subprotocol): the simplest client a user would write.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request
import uuid

from websockets.sync.client import connect

# The same statistics as the jupyter_client reference (stdlib only at import time).
from jupyter_client_ref import log, summary


class Gateway:
    def __init__(self, url: str, token: str):
        self.url = url.rstrip("/")
        self.headers = {"Authorization": f"token {token}"}

    def rest(self, method: str, path: str, body: dict | None = None) -> dict | None:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path, data=data, method=method, headers=dict(self.headers)
        )
        if data is not None:
            req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=60) as resp:
            text = resp.read()
        return json.loads(text) if text else None

    def channels(self, kernel_id: str, session: str):
        ws = self.url.replace("http", "ws", 1)
        return connect(
            f"{ws}/api/kernels/{kernel_id}/channels?session_id={session}",
            additional_headers=self.headers,
            max_size=None,
        )


def message(msg_type: str, content: dict, session: str, channel: str) -> dict:
    return {
        "header": {
            "msg_id": uuid.uuid4().hex,
            "msg_type": msg_type,
            "session": session,
            "username": "bench",
            "date": "",
            "version": "5.3",
        },
        "parent_header": {},
        "metadata": {},
        "content": content,
        "channel": channel,
        "buffers": [],
    }


def wait_ready(ws, session: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        req = message("kernel_info_request", {}, session, "shell")
        ws.send(json.dumps(req))
        try:
            while True:
                m = json.loads(ws.recv(timeout=0.5))
                if m["parent_header"].get("msg_id") == req["header"]["msg_id"] and m[
                    "header"
                ]["msg_type"] == "kernel_info_reply":
                    return
        except TimeoutError:
            continue
    raise TimeoutError("the kernel never answered kernel_info_request")


def execute(ws, session: str, code: str) -> dict:
    req = message(
        "execute_request",
        {"code": code, "silent": False, "store_history": True, "user_expressions": {},
         "allow_stdin": False, "stop_on_error": False},
        session,
        "shell",
    )
    ws.send(json.dumps(req))
    reply, idle, result = None, False, None
    while reply is None or not idle:
        m = json.loads(ws.recv(timeout=60))
        if m["parent_header"].get("msg_id") != req["header"]["msg_id"]:
            continue
        t = m["header"]["msg_type"]
        if t == "execute_reply":
            reply = m["content"]
        elif t == "status" and m["content"]["execution_state"] == "idle":
            idle = True
        elif t == "execute_result":
            result = m["content"]["data"].get("text/plain")
    if reply.get("status") != "ok" or result != "2":
        raise RuntimeError(f"execute 1+1: reply {reply}, result {result!r}")
    return reply


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--kernel", default="python3")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--starts", type=int, default=3)
    a = ap.parse_args()
    gw = Gateway(a.url, a.token)
    start_ms, execute_ms = [], []
    for i in range(max(1, a.starts)):
        session = uuid.uuid4().hex
        t0 = time.perf_counter()
        kernel = gw.rest("POST", "/api/kernels", {"name": a.kernel})
        with gw.channels(kernel["id"], session) as ws:
            wait_ready(ws, session)
            start_ms.append((time.perf_counter() - t0) * 1000.0)
            if i == 0:
                for _ in range(a.warmup):
                    execute(ws, session, "1+1")
                for _ in range(a.n):
                    t1 = time.perf_counter()
                    execute(ws, session, "1+1")
                    execute_ms.append((time.perf_counter() - t1) * 1000.0)
                log(f"gateway_ref: execute 1+1 x{a.n}: done")
        gw.rest("DELETE", f"/api/kernels/{kernel['id']}")
    import websockets

    print(json.dumps({
        "start_ms": summary(start_ms),
        "execute_ms": summary(execute_ms),
        "versions": {"websockets": websockets.__version__, "python": sys.version.split()[0]},
    }))


if __name__ == "__main__":
    main()
