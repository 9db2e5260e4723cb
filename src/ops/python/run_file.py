# Runs a Python file in the user namespace as `python FILE ARGV...` would (see python.rs,
# `run_file_code`): executed by the helper protocol (`run` called with the user's globals), so
# it leaves no name behind. One body for both cases: a file the kernel reads itself, and a
# file whose source travels in the request (base64, for a kernel that cannot read it).
import base64
import sys


def run(path, encoded, argv, ns):
    """Run `path` (or, when `encoded` is not None, that base64 source under the name `path`)
    in `ns` with `__file__ = path` and `sys.argv = [path, *argv]`, compiled with the real
    filename for tracebacks; both are restored afterwards."""
    saved_argv, had_file, saved_file = sys.argv, "__file__" in ns, ns.get("__file__")
    sys.argv = [path, *argv]
    ns["__file__"] = path
    try:
        if encoded is None:
            with open(path, "rb") as f:
                source = f.read()
        else:
            source = base64.b64decode(encoded)
        exec(compile(source, path, "exec"), ns)
    finally:
        sys.argv = saved_argv
        if had_file:
            ns["__file__"] = saved_file
        else:
            ns.pop("__file__", None)
