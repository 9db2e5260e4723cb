# Adapts a warm pool's Python kernel to the session that takes it (see adapt.rs): run once,
# silently, before the session's first code, with `plan` = {"cwd": str | None,
# "env": {name: value}}. It leaves no name in the user's namespace and nothing in history.
import os
import sys

_old_pythonpath = os.environ.get("PYTHONPATH", "")
if plan["cwd"] is not None:
    os.chdir(plan["cwd"])
    try:
        from IPython import get_ipython

        _ip = get_ipython()
        if _ip is not None and "_dh" in _ip.user_ns:
            # IPython's directory history starts at the kernel's start directory.
            _ip.user_ns["_dh"][:] = [plan["cwd"]]
    except ImportError:
        pass
os.environ.update(plan["env"])
if "PYTHONPATH" in plan["env"]:
    # The interpreter puts PYTHONPATH's entries first in sys.path at start: swap the pool
    # kernel's for the session's.
    for _p in [p for p in _old_pythonpath.split(os.pathsep) if p]:
        if _p in sys.path:
            sys.path.remove(_p)
    _new = [p for p in plan["env"]["PYTHONPATH"].split(os.pathsep) if p]
    sys.path[0:0] = _new
if "TZ" in plan["env"] and hasattr(__import__("time"), "tzset"):
    __import__("time").tzset()
