# Makes TRACEPARENT, TRACESTATE and BAGGAGE in a Python kernel's environment the current run's
# (see trace_env.rs and docs/telemetry.md). Run once per kernel, silently, when kernel-mcp
# exports traces: it registers an IPython `pre_run_cell` callback that, before each cell,
# copies the `traceparent`, `tracestate` and `baggage` kernel-mcp put in the metadata of the
# execute_request being handled; a request without them (another client's cell) gets back the values the kernel
# was launched with. It leaves no name in the user's namespace and nothing in history, and
# registers itself at most once per interpreter (a forked kernel already has it).
import os

_VARS = (("traceparent", "TRACEPARENT"), ("tracestate", "TRACESTATE"), ("baggage", "BAGGAGE"))


def _install():
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    kernel = getattr(shell, "kernel", None)
    if kernel is None or not hasattr(kernel, "get_parent"):
        return
    if any(getattr(c, "kernel_mcp_trace_env", False) for c in shell.events.callbacks.get("pre_run_cell", [])):
        return
    launched = {var: os.environ.get(var) for _, var in _VARS}

    def pre_run_cell(info=None):
        try:
            metadata = kernel.get_parent().get("metadata")
        except Exception:
            metadata = None
        if not isinstance(metadata, dict) or not isinstance(metadata.get("traceparent"), str):
            values = launched
        else:
            values = {var: metadata.get(key) for key, var in _VARS}
        for _, var in _VARS:
            value = values.get(var)
            if isinstance(value, str) and value:
                os.environ[var] = value
            else:
                os.environ.pop(var, None)

    pre_run_cell.kernel_mcp_trace_env = True
    shell.events.register("pre_run_cell", pre_run_cell)


_install()
