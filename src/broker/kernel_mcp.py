"""kernel_mcp: call the tools of the project's MCP servers from kernel code.

    from kernel_mcp import mcp

    mcp.help()                            # servers, grants and states (connects nothing)
    mcp.help("everything")                # one server's tools
    mcp.help("everything", "echo")        # one tool's input and output schema
    r = mcp.call("everything", "echo", arguments={"message": "hi"}, timeout=60)
    mcp.text(r)                           # the text blocks of a result
    r = await mcp.acall("everything", "echo", arguments={"message": "hi"})
    mcp.journal()                         # recent calls: server, tool, started, ms, outcome
    mcp.explain("everything")             # configuration, grant, credentials, state, fix

    from kernel_mcp import artifact       # values kept by reference (see _kernel_mcp_artifacts)
    ref = artifact("a large text")        # {"id": "art-…", "bytes": …, "mime": …, "sha256": …}
    artifact.forward(ref, "everything", "echo", "message")

A call returns the tool's full result envelope as a dict (content, structuredContent,
isError). A result with isError raises mcp.ToolError (its .result is the envelope); a tool
outside the registry's allowedTools raises PermissionError; what the broker cannot do raises
mcp.BrokerError.

kernel-mcp ships this module inside its binary and puts it on the PYTHONPATH of local
Python kernels. The registry is the .mcp.json in the session's working directory (or the
server's --mcp-config); the session's broker is reached over a Unix socket named in the file
$KERNEL_MCP_ENDPOINT, or, in a sandboxed kernel (which may not open Unix sockets), through
the descriptor $KERNEL_MCP_BROKER_FD: each byte written there is answered with a new
connection to the broker (SCM_RIGHTS). Standard library only. See kernel-mcp's
docs/broker.md.
"""

import asyncio
import json
import os
import socket
import threading

__all__ = ["mcp", "BrokerError", "ToolError", "ArtifactError"]

ENDPOINT_ENV = "KERNEL_MCP_ENDPOINT"
OFF_ENV = "KERNEL_MCP_BROKER_OFF"
DIALER_ENV = "KERNEL_MCP_BROKER_FD"
#: Seconds to wait for the broker to hand over a connection.
DIAL_TIMEOUT = 30
#: Largest serialized arguments of one call (bytes); the broker checks it too.
MAX_ARGUMENT_BYTES = 256 * 1024
#: Largest answer read from the broker (bytes).
MAX_REPLY_BYTES = 64 * 1024 * 1024


class BrokerError(Exception):
    """The broker could not do what was asked; .kind says why (config, unknown_server,
    unavailable, cancelled, broken, limit, off, ...) and the message what to do."""

    def __init__(self, message, kind="broker"):
        super().__init__(message)
        self.kind = kind


class ToolError(Exception):
    """The tool failed. .result is its full result envelope (isError true), or None when the
    server answered with a protocol error, which .error then holds (code, message, data)."""

    def __init__(self, message, result=None, error=None):
        super().__init__(message)
        self.result = result
        self.error = error


class _Timeout(BrokerError, TimeoutError):
    pass


class _NotFound(BrokerError, LookupError):
    pass


class _Limit(BrokerError, ValueError):
    pass


class ArtifactError(BrokerError):
    """An artifact operation failed. .code is the error code the agent's artifact tools use:
    ARTIFACT_NOT_FOUND, LIMIT_EXCEEDED, INVALID_ARGUMENT, IO_ERROR, or UNSUPPORTED (this
    kernel has no broker endpoint)."""

    def __init__(self, message, code="IO_ERROR"):
        super().__init__(message, "artifact")
        self.code = code


class _ArtifactNotFound(ArtifactError, LookupError):
    pass


class _ArtifactInvalid(ArtifactError, ValueError):
    pass


class _ArtifactLimit(ArtifactError, ValueError):
    pass


class _ArtifactRefused(ArtifactError, PermissionError):
    pass


_ARTIFACT_CODES = {"ARTIFACT_NOT_FOUND": _ArtifactNotFound, "LIMIT_EXCEEDED": _ArtifactLimit, "INVALID_ARGUMENT": _ArtifactInvalid}


def _artifact_error(message, code):
    return _ARTIFACT_CODES.get(code, ArtifactError)(message, code)


class _Text(str):
    """Text that shows as itself when it is a cell's value."""

    def __repr__(self):
        return str(self)


class _Info(dict):
    """A dict that shows as indented JSON when it is a cell's value."""

    def __repr__(self):
        return json.dumps(self, indent=2, ensure_ascii=False, default=str)


def _endpoint():
    off = os.environ.get(OFF_ENV)
    if off:
        raise BrokerError("The MCP broker is off: %s." % off, "off")
    path = os.environ.get(ENDPOINT_ENV)
    if not path:
        raise BrokerError(
            "This kernel has no MCP broker: it was not started by kernel-mcp for a local "
            "session (remote and adopted kernels have none).",
            "no_endpoint",
        )
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise BrokerError(
            "No broker endpoint for this kernel (%s is missing): its session is not attached "
            "to the broker, or it has ended. kernel-mcp's log says why." % path,
            "no_endpoint",
        ) from None
    except (OSError, ValueError) as e:
        raise BrokerError("Cannot read the broker endpoint %s: %s" % (path, e), "no_endpoint") from None


def _trace():
    """The trace context this code runs in: what kernel-mcp put in the run's execute_request
    metadata (traceparent, tracestate), else the TRACEPARENT/TRACESTATE variables."""
    try:
        from IPython import get_ipython  # inside a kernel only: the helper imports without it

        metadata = get_ipython().kernel.get_parent()["metadata"]
        found = {k: metadata[k] for k in ("traceparent", "tracestate") if isinstance(metadata.get(k), str)}
        if found:
            return found
    except Exception:
        pass
    found = {}
    for var, key in (("TRACEPARENT", "traceparent"), ("TRACESTATE", "tracestate")):
        if os.environ.get(var):
            found[key] = os.environ[var]
    return found


def traceparent():
    """The W3C traceparent of the run this code is part of (None when kernel-mcp exports no
    traces): pass it to an OpenTelemetry SDK to make your own spans children of the run's."""
    return _trace().get("traceparent")


def _line(endpoint, op, params):
    body = dict(params)
    body["key"] = endpoint["key"]
    body["op"] = op
    trace = _trace()
    if trace:
        body["trace"] = trace
    return json.dumps(body, ensure_ascii=False).encode("utf-8") + b"\n"


_KINDS = {"timeout": _Timeout, "unknown_server": _NotFound, "unknown_tool": _NotFound, "limit": _Limit}


def _answer(data):
    if not data:
        raise BrokerError(
            "The broker closed the connection without an answer (the session may have ended).",
            "broken",
        )
    try:
        reply = json.loads(data.decode("utf-8"))
    except ValueError as e:
        raise BrokerError("The broker's answer is not JSON: %s" % e, "protocol") from None
    if reply.get("ok"):
        return reply.get("result")
    error = reply.get("error") or {}
    kind = error.get("kind", "broker")
    message = error.get("message", "the broker refused the request")
    if kind == "permission":
        raise PermissionError(message)
    if kind == "tool":
        raise ToolError(message, error.get("result"), error.get("jsonrpc"))
    if kind == "artifact":
        raise _artifact_error(message, error.get("code", "IO_ERROR"))
    raise _KINDS.get(kind, BrokerError)(message, kind)


_dialer = None
_dial_lock = threading.Lock()


def _reset_after_fork():
    global _dial_lock
    _dial_lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_after_fork)


def _dial():
    """A new connection to the broker through the inherited dialer (one byte out, one
    connected socket back)."""
    global _dialer
    with _dial_lock:
        if _dialer is None:
            _dialer = socket.socket(fileno=int(os.environ[DIALER_ENV]))
            _dialer.settimeout(DIAL_TIMEOUT)
        _dialer.sendall(b"c")
        _msg, fds, _flags, _addr = socket.recv_fds(_dialer, 1, 1)
    if not fds:
        raise OSError("the broker closed the dialer")
    return socket.socket(fileno=fds[0])


def _connect(endpoint):
    """A socket connected to the session's broker: dialed where the kernel has a dialer,
    else connected to the endpoint's socket."""
    try:
        if os.environ.get(DIALER_ENV):
            return _dial()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(endpoint["socket"])
        except OSError:
            s.close()
            raise
        return s
    except (OSError, ValueError) as e:
        raise _unreachable(endpoint, e) from None


def _unreachable(endpoint, e):
    return BrokerError(
        "Cannot reach the session's broker at %s (%s): the session may have ended."
        % (endpoint.get("socket"), e),
        "no_endpoint",
    )


def _request(op, _body=None, **params):
    """One request to the session's broker, answered synchronously (interruptible: an
    interrupt closes the connection, which abandons the call). _body: the bytes that follow
    the line (artifact_put)."""
    endpoint = _endpoint()
    line = _line(endpoint, op, params)
    s = _connect(endpoint)
    try:
        try:
            s.sendall(line)
            if _body:
                s.sendall(_body)
        except OSError:
            pass  # the broker may have answered before reading it all (a request over its limit)
        chunks = []
        total = 0
        while True:
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if chunk.endswith(b"\n"):
                break
            if total > MAX_REPLY_BYTES:
                raise BrokerError("The broker's answer exceeds %d bytes." % MAX_REPLY_BYTES, "limit")
    finally:
        s.close()
    return _answer(b"".join(chunks))


async def _arequest(op, **params):
    """_request on the running event loop; cancelling the task abandons the call."""
    endpoint = _endpoint()
    line = _line(endpoint, op, params)
    s = _connect(endpoint)
    try:
        reader, writer = await asyncio.open_unix_connection(sock=s, limit=MAX_REPLY_BYTES)
    except OSError as e:
        s.close()
        raise _unreachable(endpoint, e) from None
    try:
        writer.write(line)
        try:
            await writer.drain()
        except OSError:
            pass  # as in _request: read the answer the broker may have given early
        data = await reader.readline()
    finally:
        writer.close()
    return _answer(data)


def _arguments(arguments, kwargs):
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise TypeError("arguments must be a dict of the tool's arguments, not %s" % type(arguments).__name__)
    if kwargs:
        clash = sorted(set(kwargs) & set(arguments))
        if clash:
            raise TypeError("argument(s) %s given twice (in arguments= and as keywords)" % ", ".join(clash))
        arguments = dict(arguments, **kwargs)
    size = len(json.dumps(arguments, ensure_ascii=False).encode("utf-8"))
    if size > MAX_ARGUMENT_BYTES:
        raise _Limit(
            "The arguments are %d bytes of JSON; a call may send at most %d. Pass a file path "
            "or smaller pieces instead." % (size, MAX_ARGUMENT_BYTES),
            "limit",
        )
    return arguments


def _state(state):
    if not state:
        return "not configured"
    name = state.get("state", "?").replace("_", " ")
    if state.get("state") == "broken":
        return "broken (%s)" % state.get("reason", "")
    return name


def _render_servers(info):
    lines = []
    path = info.get("registry")
    if not info.get("found"):
        lines.append("No MCP servers: %s does not exist." % path)
        lines.append('Create it with {"mcpServers": {"name": {"command": ...}}} and start a new session.')
        return "\n".join(lines)
    if not info.get("valid"):
        lines.append("The MCP registry %s cannot be used, so no call works:" % path)
        lines.extend("  - " + e for e in info.get("errors", []))
        lines.append("Fix it, then start a new session.")
        return "\n".join(lines)
    servers = info.get("servers", [])
    if not servers:
        return "No MCP servers are configured in %s." % path
    lines.append("MCP servers (registry %s):" % path)
    width = max(len(s["name"]) for s in servers)
    for s in servers:
        grant = s.get("allowedTools")
        grant = "every tool" if grant is None else (", ".join(grant) or "no tool")
        lines.append("  %-*s  %-5s  grant: %s  (%s)" % (width, s["name"], s.get("transport") or "?", grant, _state(s.get("state"))))
    lines.append('mcp.help("%s") lists its tools; mcp.call(server, tool, arguments={...}) calls one.' % servers[0]["name"])
    return "\n".join(lines)


def _render_tools(info):
    server = info.get("server")
    tools = info.get("tools", [])
    granted = [t for t in tools if t.get("granted")]
    others = [t["name"] for t in tools if not t.get("granted")]
    lines = ['Tools of MCP server "%s"%s:' % (server, "" if info.get("allowedTools") is None else " (narrowed by allowedTools)")]
    width = max([len(t["name"]) for t in granted] or [0])
    for t in granted:
        lines.append("  %-*s  %s" % (width, t["name"], t.get("description", "")))
    if not granted:
        lines.append("  (none granted)")
    if others:
        lines.append("Not granted (outside allowedTools): " + ", ".join(others))
    lines.append('mcp.help("%s", tool) shows a tool\'s input and output schema.' % server)
    return "\n".join(lines)


class _Mcp:
    """Calls the tools of the project's MCP servers (see the module's docstring)."""

    BrokerError = BrokerError
    ToolError = ToolError

    def help(self, server=None, tool=None):
        """No arguments: the servers, their grants and states (connects nothing). A server:
        its tools. A server and a tool: the tool's description and input/output schema."""
        if server is None:
            try:
                return _Text(_render_servers(_request("servers")))
            except BrokerError as e:
                if e.kind in ("off", "no_endpoint"):
                    return _Text(str(e))
                raise
        if tool is None:
            return _Text(_render_tools(_request("tools", server=server)))
        return _Info(_request("tool", server=server, tool=tool))

    def call(self, server, tool, arguments=None, timeout=None, **kwargs):
        """Call `tool` of `server` and return its result envelope (a dict). Keyword
        arguments other than these are the tool's too; use arguments={...} for tool
        arguments named server, tool, arguments or timeout. timeout: seconds (default 300).
        Raises ToolError (isError), PermissionError (outside the grant), BrokerError."""
        args = _arguments(arguments, kwargs)
        return _request("call", server=server, tool=tool, arguments=args, timeout=timeout)

    async def acall(self, server, tool, arguments=None, timeout=None, **kwargs):
        """call() for async code: `await mcp.acall(...)`; calls may run concurrently."""
        args = _arguments(arguments, kwargs)
        return await _arequest("call", server=server, tool=tool, arguments=args, timeout=timeout)

    @staticmethod
    def text(result):
        """All text blocks of a result envelope (or of a ToolError's), joined by newlines."""
        if isinstance(result, ToolError):
            result = result.result
        blocks = (result or {}).get("content") or []
        return "\n".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")

    def journal(self):
        """The session's recent calls (at most 256): server, tool, started, ms, outcome
        (ok, error or outcome_unknown). Never arguments or results."""
        try:
            return [_Info(e) for e in _request("journal")]
        except BrokerError as e:
            if e.kind in ("off", "no_endpoint"):
                return []
            raise

    def explain(self, server, tool=None):
        """What the broker knows about `server` (and `tool`) without connecting: where it is
        configured, its transport, the grant, whether each credential is present (never its
        value), the connection state and the fix for what stands in the way."""
        try:
            return _Info(_request("explain", server=server, tool=tool))
        except BrokerError as e:
            if e.kind in ("off", "no_endpoint"):
                return _Info({"server": server, "broker": e.kind, "fix": str(e)})
            raise

    def __repr__(self):
        return "<kernel_mcp.mcp: mcp.help() lists the MCP servers this session may call>"


mcp = _Mcp()


def __getattr__(name):
    """`artifact` and `ArtifactRef` live in the helper's artifact half, loaded on first use."""
    if name in ("artifact", "ArtifactRef"):
        import _kernel_mcp_artifacts

        return getattr(_kernel_mcp_artifacts, name)
    raise AttributeError("module 'kernel_mcp' has no attribute %r" % name)
