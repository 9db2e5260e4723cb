"""kernel-mcp's fork helper: copies a live ipykernel (7.x) process into a new kernel.

kernel-mcp runs this file inside the source kernel (a silent execute_request, loaded as the
module ``_kernel_mcp_fork``) and calls ``schedule(connection_file, rendezvous)``. The fork is
taken on the kernel's main thread between two main-shell requests (the main shell's lock is
free), so no cell is half-run in the copy. In the parent (the source) nothing else changes:
IPython's history-saving thread is stopped for the fork and started again (IPython's own
pre-fork step), and a daemon thread reaps the child when it exits.

The child is the hazard: only the forking thread survives a fork, so ipykernel's other threads
(iopub, heartbeat, control, shell channel, subshells, output watchers, history saving) are gone
and their locks may be held forever, and every inherited socket, pipe, eventfd and epoll
descriptor still belongs to the source's running machinery. Before anything talks to it, the
child therefore:

1. leaves the source's session and process group (``setsid``): interrupts and shutdown signals
   meant for the source never reach it; it becomes a child subreaper, so what it starts stays in
   its own tree; when kernel-mcp supervises its kernels, it forks once more, the grandchild is
   the kernel copy and this process execs ``kernel-mcp supervise --adopt-child`` as its parent
   (its report goes to the third descriptor kernel-mcp handed over); the copy then leaves that
   session too (as a spawned kernel leaves its supervisor's), dies with its supervisor
   (``PR_SET_PDEATHSIG``), and enters a nested Landlock domain that scopes its signals, where
   the host has one (ABI 6): its code cannot signal its supervisor nor the source;
2. points every inherited socket, pipe and anon-inode descriptor at /dev/null (``dup2``, so the
   numbers stay taken and nothing stale can close or reuse a live descriptor): the child can
   neither read the source's messages nor disturb its epoll sets; regular files stay shared;
3. meets kernel-mcp on the rendezvous Unix socket, which hands it fresh stdout/stderr pipes (and
   the supervisor's report pipe) and learns its pid from the kernel (SO_PEERCRED);
4. rebuilds ipykernel's sockets and threads on the new connection file (new ports, new key, new
   session id), a new asyncio loop, new output streams, and an in-memory IPython history (the
   source's SQLite connection must not be used across a fork), keeping the shell and its user
   namespace: that copy is the point;
5. runs the new kernel's loop on the main thread until ``shutdown_request``, then ``os._exit``.

The old objects are kept referenced for the child's life (``_GRAVEYARD``), so no finalizer
ever closes or unregisters a descriptor that now means something else. Everything copied from
the source is frozen out of the cyclic garbage collector (``gc.freeze``), so the copy stays
shared and no full collection stalls the new kernel.

Protocol on the rendezvous socket (one JSON line each way, then fds): the child sends
``{"role": "child"}``, receives two fds (stdout, stderr; a third, the supervisor's report, when
supervised) with a one-byte payload, and sends
``{"status": "ok"}`` once its sockets are bound (or ``{"status": "error", "message": ...}``).
The parent connects only when the fork itself failed, with ``{"role": "parent",
"status": "error", "message": ...}``.
"""

import json
import os
import socket
import sys
import threading
import traceback
import warnings

# Objects of the source's machinery the child must never finalize (see the module docs).
# Kept when the helper is loaded again (a fork of a fork): dropping them would finalize them.
_GRAVEYARD = globals().get("_GRAVEYARD", [])

# How long the helper waits for the main shell to be free before giving up (s).
_IDLE_WAIT_S = 30.0


def _unsupported(reason):
    return {"ok": False, "reason": reason}


def _app():
    try:
        import ipykernel
        from ipykernel.kernelapp import IPKernelApp
    except ImportError as e:
        return None, "ipykernel cannot be imported here (%s)" % e
    version = getattr(ipykernel, "version_info", (0,))
    if tuple(version[:1]) < (7,):
        return None, "this kernel runs ipykernel %s; forking needs ipykernel 7 or later" % (
            ipykernel.__version__
        )
    if not IPKernelApp.initialized():
        return None, "this ipykernel was not started by its kernel application"
    app = IPKernelApp.instance()
    kernel = getattr(app, "kernel", None)
    needed = ("shell", "io_loop", "_main_asyncio_lock", "shell_channel_thread", "session")
    missing = [n for n in needed if getattr(kernel, n, None) is None]
    if missing:
        return None, "this ipykernel lacks what the fork helper rebuilds (%s)" % ", ".join(missing)
    if getattr(app, "trio_loop", False):
        return None, "this kernel runs a trio loop; forking supports the asyncio loop only"
    if threading.current_thread() is not threading.main_thread():
        return None, "the kernel's main shell does not run on the main thread"
    return app, None


def schedule(connection_file, rendezvous, supervisor=None, env=None):
    """Fork this kernel once the main shell is free; the copy serves ``connection_file``.

    ``supervisor`` is the argv prefix of ``kernel-mcp supervise`` (``--adopt-child PID`` is
    appended): the child then forks the kernel copy and execs that supervisor as its parent.
    Without it the child is the kernel copy itself. ``env`` replaces variables of the copy's
    environment (the broker's endpoint is the fork session's own). Returns ``{"ok": True, "pid": <this
    kernel's pid>}`` when scheduled, or ``{"ok": False, "reason": ...}`` when this kernel
    cannot be forked (nothing is changed then).
    """
    if not sys.platform.startswith("linux"):
        return _unsupported("forking a kernel is supported on Linux only")
    if not hasattr(socket, "recv_fds"):
        return _unsupported("this Python has no socket.recv_fds (Python 3.9 or later is needed)")
    app, why = _app()
    if app is None:
        return _unsupported(why)
    deadline = _monotonic() + _IDLE_WAIT_S
    args = (app, connection_file, rendezvous, (supervisor, dict(env or {})), deadline)
    app.kernel.io_loop.add_callback(_when_idle, *args)
    return {"ok": True, "pid": os.getpid()}


def _monotonic():
    import time

    return time.monotonic()


def _when_idle(app, connection_file, rendezvous, how, deadline):
    """Fork now if no main-shell request is in progress, else look again in 10 ms."""
    if app.kernel._main_asyncio_lock.locked():
        if _monotonic() > deadline:
            _tell_failure(rendezvous, "the main shell stayed busy for %d s" % _IDLE_WAIT_S)
            return
        app.kernel.io_loop.call_later(
            0.01, _when_idle, app, connection_file, rendezvous, how, deadline
        )
        return
    _fork(app, connection_file, rendezvous, how)


def _tell_failure(rendezvous, message):
    """The parent's only message: the fork did not happen."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(rendezvous)
            line = {"role": "parent", "status": "error", "message": message}
            s.sendall(json.dumps(line).encode() + b"\n")
    except OSError:
        pass


def _fork(app, connection_file, rendezvous, how):
    from IPython.core.history import HistoryManager

    # IPython's own pre-fork step: no history write is half-done in the copy.
    HistoryManager._stop_thread()
    try:
        with warnings.catch_warnings():
            # Python 3.12+ warns about forking a threaded process: this helper is why that
            # is safe here.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError as e:
        _restart_history()
        _tell_failure(rendezvous, "fork() failed: %s" % e)
        return
    if pid == 0:
        code = 1
        try:
            _become_kernel(app, connection_file, rendezvous, how)
            code = 0
        except BaseException:
            try:
                traceback.print_exc()
                sys.stderr.flush()
            except BaseException:
                pass
        os._exit(code)
    _restart_history()
    threading.Thread(
        target=_reap, args=(pid,), name="kernel-mcp fork reaper", daemon=True
    ).start()


def _restart_history():
    from IPython.core.history import HistoryManager

    for hm in list(HistoryManager._instances):
        try:
            hm._restart_thread_if_stopped()
        except Exception:
            pass


def _reap(pid):
    try:
        os.waitpid(pid, 0)
    except OSError:
        pass


# ---------------------------------------------------------------------------------------
# The child
# ---------------------------------------------------------------------------------------


def _become_kernel(app, connection_file, rendezvous, how):
    """The child's life (see the module docs); ``how`` is ``(supervisor, env)``."""
    supervisor, env = how
    # Everything copied from the source goes to the collector's permanent generation: a
    # collection would write into every object it visits (copying each page that holds one)
    # and traverse the whole heap (about 0.4 s for a list of 15 million floats).
    import gc

    gc.freeze()
    os.setsid()
    _become_subreaper()
    devnull = _neutralize_fds()
    conn, fds = _meet(rendezvous, 3 if supervisor else 2)
    try:
        out_fd, err_fd = fds[0], fds[1]
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        os.close(out_fd)
        os.close(err_fd)
        os.close(devnull)
        if supervisor:
            _split_off_supervisor(conn, supervisor, fds[2])
        os.environ.update(env)
        _fresh_std_streams()
        _fresh_history(app.kernel.shell)
        _fresh_loop()
        _rebuild(app, connection_file)
    except BaseException as e:
        _report(conn, {"status": "error", "message": "%s: %s" % (type(e).__name__, e)})
        raise
    _report(conn, {"status": "ok"})
    while True:
        try:
            app.io_loop.start()
            break
        except KeyboardInterrupt:
            # SIGINT outside a request handler: the kernel goes on, as ipykernel's does.
            continue


def _split_off_supervisor(conn, supervisor, report_fd):
    """Fork the kernel copy; this process execs the supervisor and stays its parent.

    Returns in the kernel copy only, once it is contained. Every descriptor but 0-2 is
    close-on-exec here (Python's own, and the neutralized ones), so the supervisor inherits
    only its output pipes and its report (on fd 3).
    """
    supervisor_pid = os.getpid()
    kernel = os.fork()
    if kernel == 0:
        os.close(report_fd)
        _contain(supervisor_pid)
        return
    argv = list(supervisor) + ["--report-fd", "3", "--adopt-child", str(kernel)]
    try:
        if report_fd == 3:
            os.set_inheritable(3, True)
        else:
            os.dup2(report_fd, 3, inheritable=True)
            os.close(report_fd)
        os.execv(argv[0], argv)
    except OSError as e:
        try:
            os.kill(kernel, 9)
        except OSError:
            pass
        _report(conn, {"status": "error", "message": "cannot run the supervisor %s: %s" % (argv[0], e)})
        os._exit(127)


def _contain(supervisor_pid):
    """What a spawned kernel's child does before ``exec``: its own session and group (the
    supervisor forwards signals to that group), death with its supervisor, and signals scoped
    to its own Landlock domain where the host offers that (raises if it offers it and it fails).
    """
    import ctypes

    os.setsid()
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_PDEATHSIG = 1
    libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)
    if os.getppid() != supervisor_pid:
        os._exit(1)
    _scope_signals(libc)


def _scope_signals(libc):
    """Enter a Landlock domain that handles no access and scopes signals (ABI >= 6)."""
    import ctypes

    SYS_landlock_create_ruleset, SYS_landlock_restrict_self = 444, 446
    LANDLOCK_CREATE_RULESET_VERSION = 1
    LANDLOCK_SCOPE_SIGNAL = 2
    PR_SET_NO_NEW_PRIVS = 38
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(SYS_landlock_create_ruleset, None, ctypes.c_size_t(0),
                       ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    if abi < 6:
        return

    class Attr(ctypes.Structure):
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]

    attr = Attr(0, 0, LANDLOCK_SCOPE_SIGNAL)
    fd = libc.syscall(SYS_landlock_create_ruleset, ctypes.byref(attr),
                      ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
        if libc.syscall(SYS_landlock_restrict_self, ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(fd)


def _become_subreaper():
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_CHILD_SUBREAPER = 36
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except Exception:
        pass


def _neutralize_fds():
    """Point every inherited socket, pipe and anon-inode fd (0-2 included) at /dev/null."""
    devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    for name in os.listdir("/proc/self/fd"):
        try:
            fd = int(name)
        except ValueError:
            continue
        if fd == devnull:
            continue
        try:
            target = os.readlink("/proc/self/fd/%d" % fd)
        except OSError:
            continue
        if fd <= 2 or target.startswith(("socket:", "pipe:", "anon_inode:")):
            try:
                os.dup2(devnull, fd, inheritable=fd <= 2)
            except OSError:
                pass
    return devnull


def _meet(rendezvous, count):
    """Connect to kernel-mcp; returns the connection and the ``count`` fds it sent (stdout,
    stderr, and the supervisor's report)."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(30)
    conn.connect(rendezvous)
    conn.sendall(json.dumps({"role": "child"}).encode() + b"\n")
    msg, fds, _flags, _addr = socket.recv_fds(conn, 16, count)
    if len(fds) != count:
        raise RuntimeError("kernel-mcp sent %d descriptors, not %d (%r)" % (len(fds), count, msg))
    return conn, fds


def _report(conn, line):
    try:
        conn.sendall(json.dumps(line).encode() + b"\n")
        conn.close()
    except OSError:
        pass


def _fresh_std_streams():
    """New file objects on fds 1 and 2: the old ones may hold a dead thread's lock."""
    _GRAVEYARD.extend([sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__, sys.displayhook])
    sys.__stdout__ = open(1, "w", buffering=1, closefd=False, encoding="utf-8", errors="replace")
    sys.__stderr__ = open(2, "w", buffering=1, closefd=False, encoding="utf-8", errors="replace")
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    sys.displayhook = sys.__displayhook__


def _fresh_history(shell):
    """An in-memory history database: the source's SQLite connection stays the source's."""
    hm = getattr(shell, "history_manager", None)
    if hm is None:
        return
    _GRAVEYARD.extend([hm.db, hm.save_thread])
    hm.save_thread = None
    hm.using_thread = False
    hm.db_input_cache_lock = threading.Lock()
    hm.db_output_cache_lock = threading.Lock()
    hm.hist_file = ":memory:"
    hm.init_db()
    hm.new_session()


def _fresh_loop():
    import asyncio

    # The source's loop is kept alive by the tornado IOLoop objects in the graveyard.
    asyncio.events._set_running_loop(None)
    try:
        import signal

        signal.set_wakeup_fd(-1)
    except (ValueError, OSError):
        pass
    asyncio.set_event_loop(asyncio.new_event_loop())


def _rebuild(app, connection_file):
    """ipykernel's sockets, threads and streams, new; its kernel object and shell, kept."""
    import asyncio

    from tornado.ioloop import IOLoop
    from zmq.eventloop.zmqstream import ZMQStream

    kernel = app.kernel
    shell = kernel.shell
    _GRAVEYARD.extend(
        getattr(obj, name, None)
        for obj, names in (
            (
                app,
                (
                    "context",
                    "shell_socket",
                    "stdin_socket",
                    "control_socket",
                    "iopub_socket",
                    "iopub_thread",
                    "debugpy_socket",
                    "debug_shell_socket",
                    "control_thread",
                    "shell_channel_thread",
                    "heartbeat",
                    "poller",
                    "displayhook",
                    "io_loop",
                ),
            ),
            (
                kernel,
                ("shell_stream", "control_stream", "debugpy_stream", "io_loop", "debugger"),
            ),
        )
        for name in names
    )
    _GRAVEYARD.append(kernel._main_asyncio_lock)

    # The new connection file: ports are taken from it only where they are 0.
    for name in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port"):
        setattr(app, name, 0)
    app.curve_publickey = None
    app.curve_secretkey = None
    app.connection_file = connection_file
    app.load_connection_file(connection_file)
    session = app.session
    session.pid = os.getpid()
    import uuid

    session.session = str(uuid.uuid4())
    app.context = None
    app.poller = None
    app.init_sockets()
    app.init_heartbeat()
    app._ports = dict(
        shell=app.shell_port,
        iopub=app.iopub_port,
        stdin=app.stdin_port,
        hb=app.hb_port,
        control=app.control_port,
    )
    app.init_io()
    _reroute_log_handlers(app)

    # What init_kernel does, on the kernel object that already exists.
    shell_stream = ZMQStream(app.shell_socket, app.shell_channel_thread.io_loop)
    app.shell_channel_thread.shell_stream = shell_stream
    control_stream = ZMQStream(app.control_socket, app.control_thread.io_loop)
    debugpy_stream = ZMQStream(app.debugpy_socket, app.control_thread.io_loop)
    app.control_thread.start()
    app.shell_channel_thread.start()
    kernel.session = session
    kernel.control_stream = control_stream
    kernel.debugpy_stream = debugpy_stream
    kernel.debug_shell_socket = app.debug_shell_socket
    kernel.shell_stream = shell_stream
    kernel.control_thread = app.control_thread
    kernel.shell_channel_thread = app.shell_channel_thread
    kernel.iopub_thread = app.iopub_thread
    kernel.iopub_socket = app.iopub_socket
    kernel.stdin_socket = app.stdin_socket
    kernel._main_asyncio_lock = asyncio.Lock()
    kernel._aborting = False
    kernel.record_ports({name + "_port": port for name, port in app._ports.items()})
    app.displayhook.get_execution_count = lambda: kernel.execution_count
    _fresh_debugger(kernel, debugpy_stream, app)
    shell.displayhook.session = session
    shell.displayhook.pub_socket = kernel.iopub_socket
    shell.display_pub.session = session
    shell.display_pub.pub_socket = kernel.iopub_socket

    kernel.start()
    app.io_loop = IOLoop.current()


def _reroute_log_handlers(app):
    """The kernel's log goes to the new stderr (the old handler wrote to a dead fd)."""
    from logging import StreamHandler

    target = getattr(sys.stderr, "_original_stdstream_copy", None)
    for handler in list(app.log.handlers):
        if isinstance(handler, StreamHandler):
            _GRAVEYARD.append(handler.stream)
            if target is not None:
                import io

                handler.stream = io.TextIOWrapper(io.FileIO(os.dup(target), "w"))
            else:
                handler.stream = sys.__stderr__


def _fresh_debugger(kernel, debugpy_stream, app):
    try:
        from ipykernel.debugger import _is_debugpy_available
    except ImportError:
        return
    if not _is_debugpy_available or not hasattr(kernel, "debugger_class"):
        return
    try:
        kernel.debugger = kernel.debugger_class(
            kernel.log,
            debugpy_stream,
            kernel._publish_debug_event,
            app.debug_shell_socket,
            app.session,
            kernel._kernel_modules,
            kernel.debug_just_my_code,
            kernel.filter_internal_frames,
        )
    except Exception:
        # Debugging is not what a fork is for; everything else works without it.
        pass
