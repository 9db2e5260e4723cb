"""A person in a notebook's collaboration room, for tests/it/collab.rs.

A pycrdt client that joins the room on a Jupyter Server running jupyter-collaboration the
way JupyterLab does (document session, then the room's websocket with the y-sync and
awareness protocols), announces a user, and is driven by JSON lines on stdin, answering each
with one JSON line on stdout:

  {"cmd": "cells"}                          -> {"cells": [cell maps as JSON, execution_state kept]}
  {"cmd": "peers"}                          -> {"peers": {client id: awareness state}} (others)
  {"cmd": "type", "id": ID, "index": N, "text": T}   insert T into the cell's source at N (-1: end)
  {"cmd": "cursor", "id": ID, "index": N}   put the cursor there (JupyterLab's `cursors` field)
  {"cmd": "quit"}                           leave the room (awareness removed) and exit

argv: BASE_URL TOKEN PATH NAME. Prints {"ready": true} once synced.
"""

import asyncio
import json
import sys
import threading
import urllib.request

from pycrdt import (
    Array,
    Assoc,
    Awareness,
    Doc,
    Map,
    StickyIndex,
    YMessageType,
    YSyncMessageType,
    create_awareness_message,
    create_sync_message,
    create_update_message,
    handle_sync_message,
    read_message,
)
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

BASE, TOKEN, PATH, NAME = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3], sys.argv[4]
AUTH = {"Authorization": f"token {TOKEN}"}


def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def session():
    req = urllib.request.Request(
        f"{BASE}/api/collaboration/session/{PATH}",
        data=json.dumps({"format": "json", "type": "notebook"}).encode(),
        headers={**AUTH, "Content-Type": "application/json"},
        method="PUT",
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


class Person:
    def __init__(self, ws):
        self.ws = ws
        self.doc = Doc()
        self.cells = self.doc.get("cells", type=Array)
        self.meta = self.doc.get("meta", type=Map)
        self.awareness = Awareness(self.doc)
        self.awareness.set_local_state(
            {
                "user": {
                    "username": "person",
                    "name": NAME,
                    "display_name": NAME,
                    "initials": "P",
                    "color": "var(--jp-collaborator-color1)",
                    "avatar_url": None,
                }
            }
        )
        self.synced = asyncio.Event()
        self.remote = False
        self.doc.observe(self.on_change)

    def on_change(self, event):
        if not self.remote:
            self.ws.write_message(create_update_message(event.update), binary=True)

    def send_awareness(self):
        update = self.awareness.encode_awareness_update([self.awareness.client_id])
        self.ws.write_message(create_awareness_message(update), binary=True)

    def receive(self, msg):
        if msg[0] == YMessageType.SYNC:
            self.remote = True
            try:
                reply = handle_sync_message(msg[1:], self.doc)
            finally:
                self.remote = False
            if reply is not None:
                self.ws.write_message(reply, binary=True)
            if msg[1] == YSyncMessageType.SYNC_STEP2:
                self.synced.set()
        elif msg[0] == YMessageType.AWARENESS:
            self.awareness.apply_awareness_update(read_message(msg[1:]), "remote")

    def cell(self, cell_id):
        for c in self.cells:
            if c.get("id") == cell_id:
                return c
        raise KeyError(f"no cell {cell_id}")

    def command(self, cmd):
        kind = cmd["cmd"]
        if kind == "cells":
            return {"cells": [c.to_py() for c in self.cells]}
        if kind == "peers":
            me = self.awareness.client_id
            return {"peers": {str(k): v for k, v in self.awareness.states.items() if k != me and v}}
        if kind == "type":
            text = self.cell(cmd["id"])["source"]
            index = len(text) if cmd["index"] < 0 else cmd["index"]
            text.insert(index, cmd["text"])
            return {"ok": True}
        if kind == "cursor":
            text = self.cell(cmd["id"])["source"]
            pos = StickyIndex.new(text, cmd["index"], Assoc.AFTER).to_json()
            # As Yjs writes a relative position: every field, absent ones null.
            pos = {"type": None, "tname": None, "item": None, "assoc": 0, **pos}
            cursor = {"anchor": pos, "head": pos, "primary": True, "empty": True}
            self.awareness.set_local_state_field("cursors", [cursor])
            self.send_awareness()
            return {"ok": True}
        return {"error": f"unknown command {kind}"}


async def main():
    s = session()
    url = BASE.replace("http", "ws", 1)
    room = f"{url}/api/collaboration/room/json:notebook:{s['fileId']}?sessionId={s['sessionId']}"
    ws = await websocket_connect(HTTPRequest(room, headers=AUTH), max_message_size=1 << 30)
    person = Person(ws)
    ws.write_message(create_sync_message(person.doc), binary=True)
    person.send_awareness()

    async def reader():
        while True:
            msg = await ws.read_message()
            if msg is None:
                return
            if isinstance(msg, bytes):
                person.receive(msg)

    async def renew():
        while True:
            await asyncio.sleep(10)
            person.awareness.set_local_state(person.awareness.get_local_state())
            person.send_awareness()

    tasks = [asyncio.create_task(reader()), asyncio.create_task(renew())]
    await asyncio.wait_for(person.synced.wait(), 60)
    out({"ready": True})

    loop = asyncio.get_running_loop()
    lines: asyncio.Queue = asyncio.Queue()

    def stdin():
        for line in sys.stdin:
            loop.call_soon_threadsafe(lines.put_nowait, line)
        loop.call_soon_threadsafe(lines.put_nowait, None)

    threading.Thread(target=stdin, daemon=True).start()
    while True:
        line = await lines.get()
        if line is None:
            break
        cmd = json.loads(line)
        if cmd["cmd"] == "quit":
            break
        try:
            out(person.command(cmd))
        except Exception as e:  # a test asking for a cell that is not there
            out({"error": repr(e)})
    person.awareness.set_local_state(None)
    person.send_awareness()
    await asyncio.sleep(0.1)
    ws.close()
    for t in tasks:
        t.cancel()
    out({"bye": True})


asyncio.run(main())
