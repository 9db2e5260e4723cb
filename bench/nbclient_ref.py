#!/usr/bin/env python3
"""Reference for the bench's notebook row (p): nbclient executing a notebook, as
`jupyter execute --inplace` does, on the kernelspec kernel-mcp runs it on.

    .venv/bin/python bench/nbclient_ref.py NOTEBOOK.ipynb --kernel python3 [--kernel-arg=ARG ...]

Prints one JSON object on stdout (milliseconds, wall clock):
  start_ms    a kernel manager's start_kernel + the client's start_channels + wait_for_ready
              (NotebookClient.async_start_new_kernel and async_start_new_kernel_client);
  execute_ms  what NotebookClient.async_execute does once the kernel is up (kernel_info, then
              every cell in order, each until its execute_reply and iopub idle), plus writing
              the executed notebook back to NOTEBOOK once (nbformat.write), so that both sides
              end with the outputs in the file;
  write_ms    that write alone (part of execute_ms);
  cells, code_cells, executed (code cells with an execution count after the run), versions.
The kernel is shut down afterwards, outside the figures. Imports happen before any timing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time

import nbclient
import nbformat
from jupyter_core.utils import ensure_async
from nbclient import NotebookClient


async def run(path: str, kernel: str, extra: list[str]) -> dict:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        kernel_name=kernel,
        timeout=600,
        extra_arguments=extra,
        resources={"metadata": {"path": os.path.dirname(os.path.abspath(path))}},
    )
    client.reset_execution_trackers()
    client.km = client.create_kernel_manager()
    t0 = time.perf_counter()
    await client.async_start_new_kernel()
    await client.async_start_new_kernel_client()
    t1 = time.perf_counter()
    try:
        # The body of NotebookClient.async_execute, after async_setup_kernel.
        msg_id = await ensure_async(client.kc.kernel_info())
        info = await client.async_wait_for_reply(msg_id)
        if info is not None:
            nb.metadata["language_info"] = info["content"]["language_info"]
        for index, cell in enumerate(nb.cells):
            await client.async_execute_cell(
                cell, index, execution_count=client.code_cells_executed + 1
            )
        client.set_widgets_metadata()
        tw = time.perf_counter()
        nbformat.write(nb, path)
        t2 = time.perf_counter()
    finally:
        await client._async_cleanup_kernel()
    code = [c for c in nb.cells if c.cell_type == "code"]
    return {
        "start_ms": (t1 - t0) * 1000.0,
        "execute_ms": (t2 - t1) * 1000.0,
        "write_ms": (t2 - tw) * 1000.0,
        "cells": len(nb.cells),
        "code_cells": len(code),
        "executed": sum(1 for c in code if c.get("execution_count") is not None),
        "versions": {
            "python": platform.python_version(),
            "nbclient": nbclient.__version__,
            "nbformat": nbformat.__version__,
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebook")
    ap.add_argument("--kernel", default="python3")
    ap.add_argument("--kernel-arg", action="append", default=[], dest="kernel_args")
    a = ap.parse_args()
    out = asyncio.run(run(a.notebook, a.kernel, a.kernel_args))
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
