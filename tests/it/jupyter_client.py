"""A person's Jupyter client for tests/it/jupyter_face.rs: run one cell over a kernel's
channels websocket, the way JupyterLab does, and print what came back as JSON.

    python jupyter_client.py WS_URL TOKEN FRAMING CODE

WS_URL is `ws://HOST:PORT/api/kernels/ID/channels`; TOKEN goes in `?token=`; FRAMING is
`v1` (offer the v1.kernel.websocket.jupyter.org subprotocol, binary frames) or `json`.
Prints {"subprotocol", "stdout", "reply", "kernel_info", "foreign_iopub"}: the stream text of
the cell, its execute_reply status, whether kernel_info was answered, and how many iopub
messages parented to other clients' requests arrived meanwhile.
"""

import json
import struct
import sys
import uuid

from websockets.sync.client import connect

V1 = "v1.kernel.websocket.jupyter.org"


def message(msg_type, content, channel="shell"):
    return {
        "header": {
            "msg_id": uuid.uuid4().hex,
            "msg_type": msg_type,
            "session": "person-" + uuid.uuid4().hex[:8],
            "username": "person",
            "date": "2026-01-01T00:00:00.000000Z",
            "version": "5.3",
        },
        "parent_header": {},
        "metadata": {},
        "content": content,
        "channel": channel,
        "buffers": [],
    }


def encode_v1(m):
    parts = [m["channel"].encode()] + [
        json.dumps(m[k]).encode() for k in ("header", "parent_header", "metadata", "content")
    ]
    count = len(parts) + 1
    offset = 8 * (1 + count)
    offsets = []
    for p in parts:
        offsets.append(offset)
        offset += len(p)
    offsets.append(offset)
    return struct.pack("<Q", count) + b"".join(struct.pack("<Q", o) for o in offsets) + b"".join(parts)


def decode_v1(frame):
    count = struct.unpack_from("<Q", frame, 0)[0]
    offsets = [struct.unpack_from("<Q", frame, 8 * (i + 1))[0] for i in range(count)]
    parts = [frame[offsets[i] : offsets[i + 1]] for i in range(count - 1)]
    return {
        "channel": parts[0].decode(),
        "header": json.loads(parts[1]),
        "parent_header": json.loads(parts[2]),
        "content": json.loads(parts[4]),
    }


def main():
    url, token, framing, code = sys.argv[1:5]
    v1 = framing == "v1"
    ws = connect(f"{url}?token={token}&session_id=person", subprotocols=[V1] if v1 else None, open_timeout=30)
    chosen = ws.subprotocol
    binary = chosen == V1

    def send(m):
        ws.send(encode_v1(m) if binary else json.dumps(m))

    def recv():
        r = ws.recv(timeout=60)
        if isinstance(r, bytes) and binary:
            return decode_v1(r)
        return json.loads(r)

    info = message("kernel_info_request", {})
    run = message(
        "execute_request",
        {"code": code, "silent": False, "store_history": True, "user_expressions": {},
         "allow_stdin": False, "stop_on_error": True},
    )
    send(info)
    send(run)
    mine = {info["header"]["msg_id"], run["header"]["msg_id"]}
    out, reply, kernel_info, idle, foreign = [], None, False, False, 0
    while reply is None or not idle:
        r = recv()
        parent = r["parent_header"].get("msg_id")
        if parent not in mine:
            if r["channel"] == "iopub" and parent:
                foreign += 1
            continue
        t = r["header"]["msg_type"]
        if t == "kernel_info_reply":
            kernel_info = True
        elif parent != run["header"]["msg_id"]:
            continue
        elif t == "stream":
            out.append(r["content"]["text"])
        elif t == "execute_reply":
            reply = r["content"]["status"]
        elif t == "status" and r["content"]["execution_state"] == "idle":
            idle = True
    ws.close()
    print(json.dumps({"subprotocol": chosen, "stdout": "".join(out), "reply": reply,
                      "kernel_info": kernel_info, "foreign_iopub": foreign}))


if __name__ == "__main__":
    main()
