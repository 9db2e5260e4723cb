# `sys.executable -m pip install PACKAGES` inside the kernel, on the kernel's own machine (see
# python.rs, `pip_in_kernel_expr`): hex-encoded JSON `[returncode, the output's tail]`.
import json
import subprocess
import sys


def run(packages, tail_chars):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-input",
            *packages,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    return json.dumps([r.returncode, (r.stdout + r.stderr)[-tail_chars:]]).encode().hex()
