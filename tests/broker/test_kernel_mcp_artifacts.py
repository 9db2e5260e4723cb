"""Unit tests of the helper's artifact half (src/broker/_kernel_mcp_artifacts.py) against the
fake broker of test_kernel_mcp: what artifact(...) sends, how reads come back in pieces, how a
save is written, and how failures are raised. Run by tests/it/broker_helper.rs.
"""

import base64
import contextlib
import hashlib
import io
import json
import os
import stat
import tempfile
import unittest
from unittest import mock

import _kernel_mcp_artifacts as arts
import kernel_mcp
from kernel_mcp import ArtifactError, artifact
from test_kernel_mcp import FakeBroker


def ref_of(data, mime):
    return {"id": "art-%016x" % len(data), "bytes": len(data), "mime": mime, "sha256": hashlib.sha256(data).hexdigest()}


class Store:
    """A fake store behind the fake broker: put, read (in the broker's pieces) and errors."""

    def __init__(self):
        self.kept = {}
        self.notices = []

    def answer(self, r, body):
        op = r["op"]
        if op == "artifact_put":
            ref = ref_of(body, r["mime"])
            self.kept[ref["id"]] = (ref, body)
            return {"ok": True, "result": {"artifact": ref, "notices": self.notices}}
        if r.get("id") not in self.kept:
            return {"ok": False, "error": {"kind": "artifact", "code": "ARTIFACT_NOT_FOUND", "message": "Artifact '%s' not found" % r.get("id")}}
        ref, data = self.kept[r["id"]]
        if op == "artifact_read":
            piece = data[r["offset"]:r["offset"] + min(r["length"], 5)]  # the broker's pieces: 5 bytes
            return {"ok": True, "result": dict(ref, offset=r["offset"], next_offset=r["offset"] + len(piece), data=base64.b64encode(piece).decode())}
        return {"ok": True, "result": ref}


class ArtifactTest(unittest.TestCase):
    def setUp(self):
        self.store = Store()
        self.b = FakeBroker(lambda r: self.store.answer(r, self.b.bodies[-1]))
        self.addCleanup(self.b.close)
        os.environ["KERNEL_MCP_ENDPOINT"] = self.b.endpoint
        os.environ.pop("KERNEL_MCP_BROKER_OFF", None)

    def test_values_are_sent_as_their_bytes_and_mime_types(self):
        cases = [
            ("h\u00e9", None, b"h\xc3\xa9", "text/plain"),
            (b"\x00\xff", None, b"\x00\xff", "application/octet-stream"),
            ({"a": [1, None]}, None, b'{"a": [1, null]}', "application/json"),
            ("a,b", "csv", b"a,b", "text/csv"),
            ("x", "text/x-custom", b"x", "text/x-custom"),
        ]
        for value, format, body, mime in cases:
            ref = artifact(value, format=format)
            self.assertEqual(self.b.bodies[-1], body)
            req = self.b.requests[-1]
            self.assertEqual((req["op"], req["mime"], req["bytes"]), ("artifact_put", mime, len(body)))
            self.assertEqual((ref.id, ref.bytes, ref.mime), (ref["id"], len(body), mime))
            self.assertEqual(json.loads(repr(ref)), ref)
            self.assertEqual(artifact.load(ref), value if not isinstance(value, bytes) else body)

    def test_a_file_is_sent_with_its_path_and_a_guessed_type(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.json")
            with open(path, "wb") as f:
                f.write(b"[1]")
            ref = artifact(path=path)
        self.assertEqual(ref.mime, "application/json")
        self.assertEqual(self.b.requests[-1]["path"], path)
        self.assertEqual(self.b.bodies[-1], b"[1]")

    def test_reads_come_back_whole_from_the_brokers_pieces(self):
        ref = artifact(b"0123456789abcdefghij-")
        self.assertEqual(artifact.read(ref), b"0123456789abcdefghij-")
        self.assertEqual(artifact.read(ref.id, offset=3, length=9), b"3456789ab")
        self.assertEqual(artifact.read(ref, offset=21), b"")

    def test_save_writes_the_whole_artifact_for_its_owner_only(self):
        ref = artifact(b"0123456789abcdefghij-")
        with tempfile.TemporaryDirectory() as d:
            target = os.path.join(d, "out.bin")
            self.assertEqual(artifact.save(ref, target), target)
            with open(target, "rb") as f:
                self.assertEqual(f.read(), b"0123456789abcdefghij-")
            self.assertEqual(stat.S_IMODE(os.stat(target).st_mode), 0o600)
            self.assertEqual(os.listdir(d), ["out.bin"])

    def test_a_save_that_reads_back_another_sha256_writes_nothing(self):
        ref = artifact(b"payload")
        stored, data = self.store.kept[ref.id]
        self.store.kept[ref.id] = (dict(stored, sha256="0" * 64), data)
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(ArtifactError) as cm:
                artifact.save(ref, os.path.join(d, "out.bin"))
            self.assertEqual(cm.exception.code, "IO_ERROR")
            self.assertEqual(os.listdir(d), [])

    def test_a_save_where_the_kernel_may_not_write_is_refused(self):
        ref = artifact(b"payload")
        denied = PermissionError(13, "Permission denied")  # what Landlock answers a sandboxed kernel
        with tempfile.TemporaryDirectory() as d, mock.patch.object(arts.tempfile, "mkstemp", side_effect=denied):
            with self.assertRaises(PermissionError) as cm:
                artifact.save(ref, os.path.join(d, "out.bin"))
            self.assertEqual(os.listdir(d), [])
        self.assertEqual(cm.exception.code, "INVALID_ARGUMENT")
        self.assertIn("Permission denied", str(cm.exception))

    def test_evictions_are_told_on_stderr(self):
        self.store.notices = ["Artifact art-old was evicted to make room"]
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            artifact("new")
        self.assertEqual(err.getvalue(), "kernel-mcp: Artifact art-old was evicted to make room\n")

    def test_failures_raise_with_their_codes(self):
        with self.assertRaises(LookupError) as cm:
            artifact.read("art-0000000000000000")
        self.assertEqual(cm.exception.code, "ARTIFACT_NOT_FOUND")
        self.assertIsInstance(cm.exception, kernel_mcp.BrokerError)
        with self.assertRaises(ValueError) as cm:
            artifact(b"x" * (arts.MAX_ARTIFACT_BYTES + 1))
        self.assertEqual(cm.exception.code, "LIMIT_EXCEEDED")
        with self.assertRaises(ArtifactError) as cm:
            artifact({1, 2})
        self.assertEqual(cm.exception.code, "INVALID_ARGUMENT")
        with self.assertRaises(ArtifactError):
            artifact("x", format="no-such-format")
        for wrong in [lambda: artifact(), lambda: artifact("x", path="y"), lambda: artifact.read(3)]:
            with self.assertRaises(TypeError):
                wrong()
        puts = [r for r in self.b.requests if r["op"] == "artifact_put"]
        self.assertEqual(puts, [], "nothing was sent for what the helper refuses")

    def test_a_kernel_without_an_endpoint_says_artifacts_are_unsupported_there(self):
        os.environ["KERNEL_MCP_BROKER_OFF"] = "kernel-mcp was started with --mcp-scope none"
        self.addCleanup(os.environ.pop, "KERNEL_MCP_BROKER_OFF", None)
        with self.assertRaises(ArtifactError) as cm:
            artifact("x")
        self.assertEqual(cm.exception.code, "UNSUPPORTED")
        self.assertIn("--mcp-scope none", str(cm.exception))

    def test_forward_sends_the_id_not_the_payload(self):
        ref = artifact("y" * 1000)
        artifact.forward(ref, "srv", "echo", "message", arguments={"n": 1}, timeout=5)
        req = self.b.requests[-1]
        self.assertEqual(req["op"], "artifact_forward")
        self.assertEqual((req["id"], req["argument"], req["arguments"], req["timeout"]), (ref.id, "message", {"n": 1}, 5))
        self.assertLess(len(json.dumps(req)), 500)


if __name__ == "__main__":
    unittest.main()
