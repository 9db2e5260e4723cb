"""kernel_mcp's artifacts: values kept by reference in the session's artifact store, the one
the agent's artifact tools (list_artifacts, read_artifact, save_artifact, forward_artifact,
delete_artifact) and the resources kernel-mcp://artifacts/{id} show.

    from kernel_mcp import artifact

    ref = artifact("text")                      # str: UTF-8, text/plain
    ref = artifact(b"\\x89PNG...")               # bytes: application/octet-stream
    ref = artifact({"rows": [1, 2]})            # other JSON-safe values: application/json
    ref = artifact(csv_text, format="text/csv") # format: a MIME type, or json, text, bytes, csv...
    ref = artifact(path="out/report.parquet")   # a file's bytes (format guessed from its name)
    ref                                         # {"id": "art-…", "bytes": 1048576, "mime": …, "sha256": …}
    artifact.read(ref, offset=0, length=None)   # bytes
    artifact.load(ref)                          # the value: str, a JSON value, or bytes
    artifact.save(ref, "copy.csv")              # write a file (where this kernel may write)
    artifact.forward(ref, "server", "tool", "argument", arguments={...})  # a tool's result envelope
    artifact.list()                             # this session's artifacts
    artifact.delete(ref)

Each function takes a reference or an id. An artifact belongs to the session: it outlives a
kernel restart and goes with the session; a session keeps 64 artifacts and 64 MiB at most
(the oldest are evicted first, with a notice on stderr), one artifact 16 MiB. Failures raise
kernel_mcp.ArtifactError with .code as the agent's tools name it (ARTIFACT_NOT_FOUND,
LIMIT_EXCEEDED, INVALID_ARGUMENT, IO_ERROR; UNSUPPORTED in a kernel without the session's
broker endpoint: a remote or adopted kernel, or --mcp-scope none); a forward fails otherwise
as mcp.call does
(PermissionError outside the grant, ToolError, TimeoutError). Standard library only; loaded
by kernel_mcp on first use. See kernel-mcp's docs/broker.md.
"""

import base64
import hashlib
import json
import mimetypes
import os
import sys
import tempfile

import kernel_mcp as _k

__all__ = ["artifact", "ArtifactRef"]

#: Bytes one artifact holds at most; kernel-mcp checks it too.
MAX_ARTIFACT_BYTES = 16 * 1024 * 1024
#: Bytes asked of the broker per read (a longer range is read in pieces).
READ_PIECE = 4 * 1024 * 1024
_JSON = "application/json"
_FORMATS = {
    "text": "text/plain",
    "txt": "text/plain",
    "json": _JSON,
    "bytes": "application/octet-stream",
    "binary": "application/octet-stream",
}
_NOTHING = object()


class ArtifactRef(dict):
    """A reference to an artifact: a dict {id, bytes, mime, sha256} whose keys are also
    attributes (ref.id, ref.bytes ...). It is JSON (json.dumps(ref)) and shows as JSON when it
    is a cell's value, so the agent sees the id its artifact tools take."""

    __slots__ = ()

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __repr__(self):
        return json.dumps(self, ensure_ascii=False)

    def read(self, offset=0, length=None):
        return artifact.read(self, offset, length)

    def load(self):
        return artifact.load(self)

    def save(self, path):
        return artifact.save(self, path)

    def forward(self, server, tool, argument, arguments=None, timeout=None):
        return artifact.forward(self, server, tool, argument, arguments, timeout)

    def delete(self):
        return artifact.delete(self)


def _call(op, _body=None, **params):
    """One request to the session's broker endpoint (kernel_mcp._request); a kernel without
    one raises ArtifactError UNSUPPORTED, saying why."""
    try:
        return _k._request(op, _body=_body, **params)
    except _k.BrokerError as e:
        if e.kind not in ("off", "no_endpoint"):
            raise
        raise _k.ArtifactError(
            "Artifacts from kernel code travel through the session's broker endpoint, which this kernel cannot use: %s" % e,
            "UNSUPPORTED",
        ) from None


def _ref(record):
    return ArtifactRef((k, record[k]) for k in ("id", "bytes", "mime", "sha256"))


def _id(ref):
    if isinstance(ref, dict):
        ref = ref.get("id")
    if not isinstance(ref, str) or not ref:
        raise TypeError("an artifact is named by its reference or its id (a str like 'art-…'), not %s" % type(ref).__name__)
    return ref


def _mime(format):
    if format is None:
        return None
    if not isinstance(format, str) or not format:
        raise TypeError("format must be a MIME type (e.g. 'text/csv') or a short name like 'json', 'text', 'bytes', 'csv'")
    if "/" in format:
        return format
    mime = _FORMATS.get(format.lower()) or mimetypes.guess_type("x." + format.lower())[0]
    if mime is None:
        raise _k._ArtifactInvalid("Unknown format %r: give a MIME type (e.g. 'text/csv') or one of %s." % (format, ", ".join(_FORMATS)), "INVALID_ARGUMENT")
    return mime


def _too_large(size):
    return _k._ArtifactLimit(
        "The value is %d bytes; an artifact holds at most %d bytes. Keep a smaller value, or write it to a file." % (size, MAX_ARTIFACT_BYTES),
        "LIMIT_EXCEEDED",
    )


def _encode(value, format):
    """The bytes and MIME type of `value`, as the module docstring says."""
    mime = _mime(format)
    if isinstance(value, str):
        if len(value) > MAX_ARTIFACT_BYTES:
            raise _too_large(len(value))
        return value.encode("utf-8"), mime or "text/plain"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value), mime or "application/octet-stream"
    if mime is not None and not (mime == _JSON or mime.endswith("+json")):
        raise _k._ArtifactInvalid("A %s is kept as JSON; format %r is not a JSON type (pass str or bytes for other formats)." % (type(value).__name__, format), "INVALID_ARGUMENT")
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise _k._ArtifactInvalid(
            "artifact() keeps str, bytes or a JSON-safe value (dict, list, str, number, bool, None); this %s is not (%s). "
            "Convert it (e.g. df.to_json(), df.to_csv()) or write it to a file and pass path=." % (type(value).__name__, e),
            "INVALID_ARGUMENT",
        ) from None
    return text.encode("utf-8"), mime or _JSON


def _file(path, format):
    """The bytes of the file at `path`, its MIME type and its absolute path."""
    where = os.path.abspath(os.fspath(path))
    size = os.stat(where).st_size
    if size > MAX_ARTIFACT_BYTES:
        raise _too_large(size)
    with open(where, "rb") as f:
        data = f.read(MAX_ARTIFACT_BYTES + 1)
    if len(data) > MAX_ARTIFACT_BYTES:
        raise _too_large(len(data))
    mime = _mime(format) or mimetypes.guess_type(where)[0] or "application/octet-stream"
    return data, mime, where


def _read(ident, offset, length):
    """(the artifact's record, `length` bytes from `offset`, or all to the end)."""
    if offset < 0 or (length is not None and length < 0):
        raise ValueError("offset and length are byte counts (0 or more)")
    pieces, got, record = [], 0, None
    while True:
        want = READ_PIECE if length is None else min(READ_PIECE, length - got)
        record = _call("artifact_read", id=ident, offset=offset + got, length=want)
        piece = base64.b64decode(record["data"])
        pieces.append(piece)
        got += len(piece)
        done = length is not None and got >= length
        if not piece or done or record["next_offset"] >= record["bytes"]:
            return record, b"".join(pieces)


def _refused(target, e):
    return _k._ArtifactRefused(
        "Cannot write %s (%s). The kernel writes the file itself, so only where it may write: "
        "a sandboxed session's kernel, beneath its sandbox's grants (its cwd, for workspace)." % (target, e.strerror or e),
        "INVALID_ARGUMENT",
    )


def _write(ident, target):
    """Write the artifact into `target` (0600, replaced atomically); its sha256 checked."""
    folder = os.path.dirname(target)
    try:
        fd, part = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(target) + ".", suffix=".part")
    except PermissionError as e:
        raise _refused(target, e) from None
    except OSError as e:
        raise _k.ArtifactError("Cannot write %s: %s" % (target, e), "IO_ERROR") from None
    try:
        digest, offset, record = hashlib.sha256(), 0, None
        with os.fdopen(fd, "wb") as f:
            while record is None or offset < record["bytes"]:
                record, piece = _read(ident, offset, READ_PIECE)
                if not piece:
                    break
                f.write(piece)
                digest.update(piece)
                offset += len(piece)
        if digest.hexdigest() != record["sha256"]:
            raise _k.ArtifactError("Artifact %s read back with another sha256; nothing was written." % ident, "IO_ERROR")
        os.replace(part, target)
    except BaseException:
        try:
            os.unlink(part)
        except OSError:
            pass
        raise
    return _ref(record)


class _Artifacts:
    """artifact(value) / artifact(path=…, format=…) and the functions over the session's
    artifacts (see the module's docstring)."""

    Ref = ArtifactRef
    Error = _k.ArtifactError

    def __call__(self, value=_NOTHING, *, path=None, format=None):
        """Keep `value` (str: text/plain; bytes: application/octet-stream; another JSON-safe
        value: application/json) or the bytes of the file at `path`, as a new artifact of the
        session; `format` (a MIME type, or json, text, bytes, csv, png...) overrides the type.
        Returns its ArtifactRef. Raises ArtifactError (LIMIT_EXCEEDED over 16 MiB,
        INVALID_ARGUMENT for a value that is not JSON-safe), OSError for an unreadable file."""
        if (value is _NOTHING) == (path is None):
            raise TypeError("artifact() takes a value, or path=… (a file), not both or neither")
        where = None
        if path is not None:
            data, mime, where = _file(path, format)
        else:
            data, mime = _encode(value, format)
        if len(data) > MAX_ARTIFACT_BYTES:
            raise _too_large(len(data))
        kept = _call("artifact_put", _body=data, mime=mime, bytes=len(data), path=where)
        for notice in kept.get("notices") or []:
            print("kernel-mcp: %s" % notice, file=sys.stderr)
        return _ref(kept["artifact"])

    def read(self, ref, offset=0, length=None):
        """`length` bytes of the artifact from byte `offset` (None: to its end), as bytes."""
        return _read(_id(ref), offset, length)[1]

    def load(self, ref):
        """The whole artifact as the value it holds: a JSON type parsed, text as str (UTF-8),
        anything else as bytes."""
        record, data = _read(_id(ref), 0, None)
        mime = record["mime"].split(";")[0].strip()
        if mime == _JSON or mime.endswith("+json"):
            return json.loads(data.decode("utf-8"))
        if mime.startswith("text/"):
            return data.decode("utf-8", errors="replace")
        return data

    def save(self, ref, path):
        """Write the artifact to the file `path` (relative: this kernel's cwd), replacing it
        atomically, readable by its owner only. The kernel writes it, so a sandboxed session
        writes only within its grants (else ArtifactError INVALID_ARGUMENT, a PermissionError).
        Returns the absolute path."""
        target = os.path.abspath(os.fspath(path))
        _write(_id(ref), target)
        return target

    def forward(self, ref, server, tool, argument, arguments=None, timeout=None):
        """Call `tool` of `server` (the session's broker registry, within its allowedTools)
        with the artifact as the argument named `argument` (a JSON artifact parsed, text as
        a string, bytes as base64) and `arguments` beside it; the payload goes from the store
        to the server without passing through this kernel. Returns the result envelope, as
        mcp.call does; journalled like it. Raises ArtifactError LIMIT_EXCEEDED when the
        arguments exceed 16 MiB + 64 KiB of JSON (nothing is sent), and what mcp.call raises."""
        if not isinstance(argument, str) or not argument:
            raise TypeError("argument must name the tool's argument that receives the artifact")
        args = _k._arguments(arguments, {})
        return _call("artifact_forward", id=_id(ref), server=server, tool=tool, argument=argument, arguments=args, timeout=timeout)

    def list(self):
        """This session's artifacts, oldest first: id, bytes, mime, sha256, session_id,
        origin ('kernel' for what kernel code kept, '{run_id}/result' for a cut result),
        created."""
        return [ArtifactRef(r) for r in _call("artifact_list")]

    def delete(self, ref):
        """Forget the artifact; returns its reference."""
        return _ref(_call("artifact_delete", id=_id(ref)))

    def __repr__(self):
        return "<kernel_mcp.artifact: artifact(value) keeps a value by reference; artifact.list() shows this session's>"


artifact = _Artifacts()
