#!/usr/bin/env python3
"""Reference figures for `make bench`: the same kernelspec driven by jupyter_client directly.

Prints one JSON object on stdout (progress goes to stderr). examples/bench.rs runs this with
the project venv's interpreter (`.venv/bin/python bench/jupyter_client_ref.py`) and puts the
figures next to kernel-mcp's. It also runs standalone:

    .venv/bin/python bench/jupyter_client_ref.py --n 200 --starts 3

What is measured (all wall-clock, milliseconds):
  start_ms       KernelManager.start_kernel() + client.start_channels() + wait_for_ready(),
                 i.e. spawn -> ready, for `--starts` fresh kernels (cold start each time).
  execute_ms     execute("1+1") round trips on one kernel: send execute_request, then wait for
                 both the shell execute_reply and the iopub status:idle parented to it (the
                 same definition of "done" kernel-mcp uses). `--warmup` runs are discarded.
  shutdown_ms    KernelManager.shutdown_kernel(now=False) per kernel.
  client_rss_idle_kib  VmRSS of this Python process (the jupyter_client "driver") after
                 importing jupyter_client, before any kernel is started.
  client_rss_kib VmRSS of this Python process with one kernel running, for comparison with
                 kernel-mcp's own RSS.
  kernel_rss_kib VmRSS of the kernel process.
  concurrent     with --sessions N: N kernels, one thread each doing --per executes at once:
                 p50_ms, p99_ms, per_s, cpu_ms_per_execute (this process's CPU time).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time


def log(*args: object) -> None:
    print(*args, file=sys.stderr, flush=True)


def vmrss_kib(pid: int | str = "self") -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def summary(samples_ms: list[float]) -> dict:
    s = sorted(samples_ms)
    n = len(s)
    if n == 0:
        return {"n": 0}
    # nearest-rank percentile, same as examples/bench.rs
    p95 = s[min(n - 1, max(0, -(-95 * n // 100) - 1))]
    return {
        "n": n,
        "median": statistics.median(s),
        "p95": p95,
        "min": s[0],
        "max": s[-1],
        "mean": statistics.fmean(s),
    }


def start(kernel_name: str, timeout: float, extra: list):
    from jupyter_client.manager import KernelManager

    t0 = time.perf_counter()
    km = KernelManager(kernel_name=kernel_name)
    km.start_kernel(extra_arguments=extra)
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=timeout)
    return km, kc, (time.perf_counter() - t0) * 1000.0


def execute_once(kc, code: str, timeout: float) -> tuple[float, dict]:
    """execute_request -> iopub status:idle AND shell execute_reply for it. Returns (ms, reply).

    Both sockets buffer while we block on the other one, so waiting for idle first and then
    for the reply (as BlockingKernelClient.execute_interactive does) loses nothing.
    """
    t0 = time.perf_counter()
    deadline = t0 + timeout
    msg_id = kc.execute(code, store_history=True)
    while True:
        msg = kc.get_iopub_msg(timeout=max(0.0, deadline - time.perf_counter()))
        if (
            msg["parent_header"].get("msg_id") == msg_id
            and msg["msg_type"] == "status"
            and msg["content"]["execution_state"] == "idle"
        ):
            break
    while True:
        reply = kc.get_shell_msg(timeout=max(0.0, deadline - time.perf_counter()))
        if reply["parent_header"].get("msg_id") == msg_id:
            break
    return (time.perf_counter() - t0) * 1000.0, reply


FLOOD_CODE = "for _ in range(50_000):\n    print('x' * 999)"


def vmhwm_kib() -> int | None:
    """Peak RSS of this process (VmHWM)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def flood(kc, timeout: float) -> dict:
    """Run FLOOD_CODE (50 MB as 50 000 lines) and keep every stream text, as a client must."""
    t0 = time.perf_counter()
    deadline = t0 + timeout
    msg_id = kc.execute(FLOOD_CODE, store_history=True)
    received = 0
    chunks = []
    while True:
        msg = kc.get_iopub_msg(timeout=max(0.0, deadline - time.perf_counter()))
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream":
            chunks.append(msg["content"]["text"])
            received += len(msg["content"]["text"])
        elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    while True:
        reply = kc.get_shell_msg(timeout=max(0.0, deadline - time.perf_counter()))
        if reply["parent_header"].get("msg_id") == msg_id:
            break
    return {"ms": (time.perf_counter() - t0) * 1000.0, "bytes_received": received, "client_peak_rss_kib": vmhwm_kib()}


def concurrent(kernel_name: str, sessions: int, per: int, timeout: float, extra: list) -> dict:
    """`sessions` kernels, each driven by its own thread doing `per` executes, all at once.

    Latency is per execute; cpu_ms_per_execute is this process's CPU time (all threads) over
    the run divided by the executes done.
    """
    import threading

    started = [start(kernel_name, timeout, extra) for _ in range(sessions)]
    lat: list[list[float]] = [[] for _ in range(sessions)]
    barrier = threading.Barrier(sessions + 1)

    def worker(i: int) -> None:
        kc = started[i][1]
        barrier.wait()
        for _ in range(per):
            try:
                ms, reply = execute_once(kc, "1+1", timeout)
            except Exception:  # noqa: BLE001  (a lost reply ends this thread's run)
                return
            if reply["content"].get("status") != "ok":
                return
            lat[i].append(ms)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(sessions)]
    for t in threads:
        t.start()
    barrier.wait()
    c0 = os.times()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    c1 = os.times()
    cpu_ms = ((c1.user - c0.user) + (c1.system - c0.system)) * 1000.0
    for km, kc, _ in started:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    flat = sorted(x for l in lat for x in l)
    n = len(flat)
    pct = lambda p: flat[min(n - 1, max(0, -(-p * n // 100) - 1))] if n else None  # noqa: E731
    return {
        "p50_ms": statistics.median(flat) if n else None,
        "p99_ms": pct(99),
        "executes": n,
        "attempted": sessions * per,
        "wall_s": wall,
        "per_s": n / wall if wall > 0 else None,
        "cpu_ms_per_execute": cpu_ms / max(1, n),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", default="python3", help="kernelspec name (default python3)")
    ap.add_argument("--n", type=int, default=200, help="execute 1+1 round trips (default 200)")
    ap.add_argument("--warmup", type=int, default=5, help="discarded warm-up executes (default 5)")
    ap.add_argument("--starts", type=int, default=3, help="cold kernel starts (default 3)")
    ap.add_argument("--sessions", type=int, default=0, help="concurrent row: kernels/threads (0 = skip)")
    ap.add_argument("--per", type=int, default=100, help="concurrent row: executes per thread")
    ap.add_argument("--no-floods", action="store_true", help="(for the raw client; nothing to skip here)")
    ap.add_argument(
        "--kernel-arg",
        action="append",
        default=[],
        help="appended to the kernel's command line (the options kernel-mcp adds; repeatable)",
    )
    ap.add_argument("--timeout", type=float, default=60.0, help="per-step timeout in seconds")
    args = ap.parse_args()

    import ipykernel  # noqa: F401  (version only; the kernel runs in its own process)
    import jupyter_client
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec(args.kernel)
    log(f"jupyter_client {jupyter_client.__version__}: kernel {args.kernel!r} from {spec.resource_dir}")
    from jupyter_client.manager import KernelManager  # noqa: F401  (import before measuring)

    client_rss_idle = vmrss_kib()

    start_ms: list[float] = []
    shutdown_ms: list[float] = []
    exec_ms: list[float] = []
    kernel_rss = None
    client_rss = None
    flood_result = None

    for i in range(max(1, args.starts)):
        km, kc, ms = start(args.kernel, args.timeout, args.kernel_arg)
        start_ms.append(ms)
        log(f"start {i + 1}/{args.starts}: {ms:.0f} ms")
        try:
            if i == 0:
                for _ in range(args.warmup):
                    execute_once(kc, "1+1", args.timeout)
                for _ in range(args.n):
                    ms, reply = execute_once(kc, "1+1", args.timeout)
                    if reply["content"].get("status") != "ok":
                        raise RuntimeError(f"execute 1+1 failed: {reply['content']}")
                    exec_ms.append(ms)
                log(f"execute 1+1 x{args.n}: median {statistics.median(exec_ms):.2f} ms")
                time.sleep(0.2)
                pid = getattr(km.provisioner, "pid", None) if km.provisioner else None
                if pid is not None:
                    kernel_rss = vmrss_kib(pid)
                client_rss = vmrss_kib()
                flood_result = flood(kc, 300.0)
                log(f"flood: {flood_result['ms']:.0f} ms, {flood_result['bytes_received']} bytes")
        finally:
            kc.stop_channels()
            t0 = time.perf_counter()
            km.shutdown_kernel(now=False)
            shutdown_ms.append((time.perf_counter() - t0) * 1000.0)

    concurrent_result = None
    if args.sessions > 0:
        concurrent_result = concurrent(args.kernel, args.sessions, args.per, args.timeout, args.kernel_arg)
        log(f"concurrent {args.sessions}x{args.per}: {concurrent_result}")

    out = {
        "tool": "jupyter_client",
        "versions": {
            "python": platform.python_version(),
            "jupyter_client": jupyter_client.__version__,
            "ipykernel": ipykernel.__version__,
        },
        "kernel": args.kernel,
        "kernel_resource_dir": spec.resource_dir,
        "start_ms": summary(start_ms),
        "execute_ms": summary(exec_ms),
        "shutdown_ms": summary(shutdown_ms),
        "client_rss_idle_kib": client_rss_idle,
        "client_rss_kib": client_rss,
        "kernel_rss_kib": kernel_rss,
        "flood": flood_result,
        "concurrent": concurrent_result,
    }
    json.dump(out, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
