# Names, types and short summaries of the user's variables (see python.rs, `VARIABLES`), as
# hex-encoded JSON. Only exact builtin scalars and strings are repr'd; containers show their
# length, numpy/pandas objects their shape; nothing calls a user-defined `__repr__`.
import json

HIDDEN = ("In", "Out", "exit", "quit", "get_ipython")
LEFT_OUT_TYPES = ("module", "function", "builtin_function_or_method", "type")


def summary(v):
    t = type(v)
    if t in (int, float, bool, complex, type(None)):
        return repr(v)[:80]
    if t in (str, bytes):
        return repr(v[:60]) + ("..." if len(v) > 60 else "")
    if t in (list, tuple, dict, set, frozenset):
        return "len=%d" % len(v)
    if t.__module__.split(".")[0] in ("numpy", "pandas") and hasattr(t, "shape"):
        return "shape=%s" % (tuple(v.shape),)
    return ""


def run(ns):
    return (
        json.dumps(
            [
                {"name": k, "type": type(v).__name__, "summary": summary(v)}
                for k, v in list(ns.items())
                if not k.startswith("_")
                and k not in HIDDEN
                and type(v).__name__ not in LEFT_OUT_TYPES
            ]
        )
        .encode()
        .hex()
    )
