"""How much keeping requests waiting in a kernel's shell queue saves, with jupyter_client alone.

Runs the 90 code cells of row (p)'s 100-cell notebook (see nb_corpus.rs) in one ipykernel,
six repetitions of each depth in turn: depth 1 sends a cell's execute_request once the cell
before has its reply and `idle`; depth 2 and 3 keep one or two more requests waiting in the
kernel's shell queue, as JupyterLab's "run all" does. A thread reads iopub throughout; a
run ends at its last cell's `idle`. Prints the median wall time of each depth in ms.

    .venv/bin/python examples/bench/shell_queue_depth.py [kernel_name]

docs/performance.md (Notebooks) quotes its figures.
"""

import queue
import statistics
import sys
import threading
import time

from jupyter_client.manager import start_new_kernel

TEMPLATES = [
    "total_@K = sum(v * v for v in data[:@K0])\ntotal_@K",
    "for i in range(10):\n    print(f'step @K.{i}: {i * i}')",
    "display(Markdown(f'**cell @K**: mean = {statistics.mean(data):.4f}'))",
    "stats_@K = {'min': min(data), 'max': max(data), 'n': len(data)}\nstats_@K",
    "def scale_@K(x):\n    return x * @K + 1\n\n[scale_@K(i) for i in range(8)]",
    "words = 'the quick brown fox jumps over the lazy dog'.split()\nsorted(words, key=len)[:5]",
    "x_@K = sorted(data)[@K]",
    "print(json.dumps({'cell': @K, 'values': [round(v, 3) for v in data[:5]]}))",
    "display(HTML('<table><tr><td>@K</td><td>' + str(round(data[@K], 4)) + '</td></tr></table>'))",
    "math.factorial(@K % 30 + 10)",
]
SETUP = (
    "import json, math, statistics\n"
    "from IPython.display import HTML, Markdown, display\n"
    "data = [math.sin(i / 10) for i in range(1000)]"
)
# Cell 0 and every twelfth are markdown, cell 1 is SETUP: the rest are code.
CELLS = [TEMPLATES[k % 10].replace("@K", str(k)) for k in range(2, 100) if k % 12]
REPS = 6


def main():
    km, kc = start_new_kernel(kernel_name=sys.argv[1] if len(sys.argv) > 1 else "python3")
    try:
        kc.execute_interactive(SETUP)
        idles = queue.Queue()

        def read_iopub():
            while True:
                try:
                    m = kc.get_iopub_msg(timeout=1)
                except queue.Empty:
                    continue
                except Exception:
                    return
                if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                    idles.put(m["parent_header"].get("msg_id"))

        threading.Thread(target=read_iopub, daemon=True).start()

        def run(depth):
            cells, waiting = iter(CELLS), []
            for _ in range(depth):
                waiting.append(kc.execute(next(cells)))
            while waiting:
                kc.get_shell_msg(timeout=60)
                first = waiting.pop(0)
                while idles.get(timeout=60) != first:
                    pass
                code = next(cells, None)
                if code is not None:
                    waiting.append(kc.execute(code))

        times = {1: [], 2: [], 3: []}
        for _ in range(REPS):
            for depth, ms in times.items():
                t = time.perf_counter()
                run(depth)
                ms.append((time.perf_counter() - t) * 1000)
        for depth, ms in times.items():
            print(f"depth {depth}: median {statistics.median(ms):.1f} ms",
                  [round(x) for x in ms])
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


if __name__ == "__main__":
    main()
