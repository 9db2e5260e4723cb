"""Unit tests of the kernel_mcp helper (src/broker/kernel_mcp.py) against a fake broker: a
Unix socket answering one JSON line per connection (read with the bytes an artifact_put line
announces), as kernel-mcp's endpoint does. Run by
tests/it/broker_helper.rs (python -m unittest), with the module's directory on sys.path.
"""

import asyncio
import json
import os
import signal
import socket
import tempfile
import threading
import time
import unittest

import kernel_mcp
from kernel_mcp import mcp


class FakeBroker:
    """Answers each request with `answer(request)`; records requests; `hold` keeps a
    connection open without answering until the peer closes it (then sets `closed`)."""

    def __init__(self, answer):
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, "mcp.sock")
        self.answer = answer
        self.requests = []
        self.bodies = []
        self.closed = threading.Event()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(8)
        threading.Thread(target=self._serve, daemon=True).start()
        self.endpoint = os.path.join(self.dir, "endpoint.mcp")
        with open(self.endpoint, "w") as f:
            json.dump({"socket": self.path, "key": "k" * 64, "session": "s"}, f)

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn):
        data = b""
        while b"\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
        line, body = data.split(b"\n", 1)
        request = json.loads(line)
        # artifact_put: the line says how many bytes follow it.
        while len(body) < request.get("bytes", 0):
            chunk = conn.recv(65536)
            if not chunk:
                return
            body += chunk
        self.bodies.append(body)
        self.requests.append(request)
        reply = self.answer(request)
        if reply == "hold":
            while conn.recv(1):
                pass
            self.closed.set()
        else:
            conn.sendall(json.dumps(reply).encode() + b"\n")
        conn.close()

    def close(self):
        self.sock.close()


ENVELOPE = {
    "content": [{"type": "text", "text": "one"}, {"type": "image", "data": "AA==", "mimeType": "image/png"}, {"type": "text", "text": "two"}],
    "structuredContent": None,
    "isError": False,
}


class HelperTest(unittest.TestCase):
    def broker(self, answer):
        b = FakeBroker(answer)
        self.addCleanup(b.close)
        os.environ["KERNEL_MCP_ENDPOINT"] = b.endpoint
        os.environ.pop("KERNEL_MCP_BROKER_OFF", None)
        return b

    def test_call_sends_key_op_and_arguments_and_returns_the_envelope(self):
        b = self.broker(lambda r: {"ok": True, "result": ENVELOPE})
        r = mcp.call("srv", "echo", arguments={"a": 1}, b=2, timeout=5)
        self.assertEqual(r, ENVELOPE)
        req = b.requests[0]
        self.assertEqual((req["op"], req["server"], req["tool"], req["timeout"]), ("call", "srv", "echo", 5))
        self.assertEqual(req["arguments"], {"a": 1, "b": 2})
        self.assertEqual(req["key"], "k" * 64)
        self.assertEqual(mcp.text(r), "one\ntwo")

    def test_acall_runs_concurrently_on_the_event_loop(self):
        self.broker(lambda r: {"ok": True, "result": {"content": [{"type": "text", "text": r["arguments"]["m"]}]}})

        async def main():
            return await asyncio.gather(*(mcp.acall("srv", "echo", m=str(i)) for i in range(4)))

        self.assertEqual([mcp.text(r) for r in asyncio.run(main())], ["0", "1", "2", "3"])

    def test_errors_raise_by_kind(self):
        kinds = {
            "permission": PermissionError,
            "tool": mcp.ToolError,
            "timeout": TimeoutError,
            "unknown_server": LookupError,
            "limit": ValueError,
            "config": mcp.BrokerError,
        }
        for kind, exc in kinds.items():
            error = {"kind": kind, "message": "because " + kind}
            if kind == "tool":
                error["result"] = dict(ENVELOPE, isError=True)
            self.broker(lambda r, e=error: {"ok": False, "error": e})
            with self.assertRaises(exc) as cm:
                mcp.call("srv", "t")
            self.assertIn("because " + kind, str(cm.exception))
            if kind == "tool":
                self.assertTrue(cm.exception.result["isError"])
                self.assertEqual(mcp.text(cm.exception), "one\ntwo")

    def test_arguments_over_the_limit_are_refused_before_sending(self):
        b = self.broker(lambda r: {"ok": True, "result": ENVELOPE})
        with self.assertRaises(ValueError):
            mcp.call("srv", "t", arguments={"x": "y" * kernel_mcp.MAX_ARGUMENT_BYTES})
        with self.assertRaises(TypeError):
            mcp.call("srv", "t", arguments={"x": 1}, x=2)
        self.assertEqual(b.requests, [])

    def test_an_interrupt_closes_the_connection(self):
        b = self.broker(lambda r: "hold")
        done = []

        def interrupt_soon():
            time.sleep(0.3)
            os.kill(os.getpid(), signal.SIGINT)  # as the kernel's interrupt does

        threading.Thread(target=interrupt_soon, daemon=True).start()
        try:
            mcp.call("srv", "slow")
        except KeyboardInterrupt:
            done.append(True)
        self.assertEqual(done, [True])
        self.assertTrue(b.closed.wait(5), "the broker did not see the connection close")

    def test_off_and_missing_endpoints_say_why(self):
        os.environ["KERNEL_MCP_BROKER_OFF"] = "kernel-mcp was started with --mcp-scope none"
        self.assertIn("--mcp-scope none", mcp.help())
        self.assertEqual(mcp.journal(), [])
        with self.assertRaises(mcp.BrokerError) as cm:
            mcp.call("srv", "t")
        self.assertEqual(cm.exception.kind, "off")
        del os.environ["KERNEL_MCP_BROKER_OFF"]
        os.environ["KERNEL_MCP_ENDPOINT"] = "/nonexistent/kernel-mcp.mcp"
        with self.assertRaises(mcp.BrokerError) as cm:
            mcp.call("srv", "t")
        self.assertEqual(cm.exception.kind, "no_endpoint")
        self.assertIn("/nonexistent/kernel-mcp.mcp", str(cm.exception))

    def test_help_renders_servers_and_tools(self):
        servers = {
            "registry": "/p/.mcp.json", "found": True, "valid": True, "errors": [],
            "servers": [{"name": "srv", "transport": "stdio", "allowedTools": ["echo"], "state": {"state": "not_started"}}],
        }
        tools = {"server": "srv", "allowedTools": ["echo"], "tools": [
            {"name": "echo", "description": "Echoes", "granted": True},
            {"name": "add", "description": "Adds", "granted": False},
        ]}
        self.broker(lambda r: {"ok": True, "result": servers if r["op"] == "servers" else tools})
        text = mcp.help()
        self.assertIn("srv", text)
        self.assertIn("grant: echo", text)
        self.assertIn("not started", text)
        self.assertEqual(repr(text), str(text))
        text = mcp.help("srv")
        self.assertIn("echo  Echoes", text)
        self.assertIn("Not granted (outside allowedTools): add", text)

    def test_a_sandboxed_kernel_dials_through_its_inherited_descriptor(self):
        b = self.broker(lambda r: {"ok": True, "result": {"content": [{"type": "text", "text": r["tool"]}]}})
        # The server's side of the dialer: a byte in, a connection to the broker out.
        ours, theirs = socket.socketpair()
        self.addCleanup(ours.close)
        self.addCleanup(theirs.close)

        def serve():
            while ours.recv(1):
                conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                conn.connect(b.path)
                socket.send_fds(ours, [b"c"], [conn.fileno()])
                conn.close()

        threading.Thread(target=serve, daemon=True).start()
        os.environ["KERNEL_MCP_BROKER_FD"] = str(os.dup(theirs.fileno()))
        # The endpoint names no socket it could reach: the dialer is the only way.
        endpoint = os.path.join(b.dir, "sandboxed.mcp")
        with open(endpoint, "w") as f:
            json.dump({"socket": "/nonexistent/mcp.sock", "key": "k" * 64, "session": "s"}, f)
        os.environ["KERNEL_MCP_ENDPOINT"] = endpoint
        kernel_mcp._dialer = None

        def restore():
            os.environ.pop("KERNEL_MCP_BROKER_FD", None)
            if kernel_mcp._dialer is not None:
                kernel_mcp._dialer.close()
            kernel_mcp._dialer = None

        self.addCleanup(restore)
        self.assertEqual(mcp.text(mcp.call("srv", "sync")), "sync")

        async def main():
            return await asyncio.gather(*(mcp.acall("srv", "t%d" % i) for i in range(3)))

        self.assertEqual([mcp.text(r) for r in asyncio.run(main())], ["t0", "t1", "t2"])
        self.assertEqual(len(b.requests), 4)


if __name__ == "__main__":
    unittest.main()
