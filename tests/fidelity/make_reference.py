"""Make the fidelity test's notebooks and nbclient reference outputs (run by hand, not in CI).

    python tests/fidelity/make_reference.py DIR [NAME ...]

DIR holds the distribution files named in SOURCES (e.g. fetched with
`pip download --no-deps nbdime==4.0.4 ...`). For each line of SOURCES (or only the NAMEs
given) this copies the notebook out of its distribution with outputs and execution counts
stripped into notebooks/NAME.ipynb (a line whose distribution is `-` names a notebook written
for this project, already in notebooks/), executes that copy once with nbclient (kernel python3, a fresh
empty working directory, errors allowed, 30 s per cell) and writes the executed notebook to
reference/NAME.ipynb, with every image value replaced by a short placeholder so the repository
stays small (the test compares images by MIME type only; see docs/fidelity.md).
"""

import base64
import copy
import sys
import tempfile
import zipfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent


def sources():
    for line in (HERE / "SOURCES").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, package, version, dist, path = line.split("\t")
            yield name, package, version, dist, path


def stripped(nb):
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    return nb


def shorten_images(nb):
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            for mime, value in out.get("data", {}).items():
                if mime.startswith("image/") and mime != "image/svg+xml":
                    raw = "".join(value) if isinstance(value, list) else value
                    try:
                        size = len(base64.b64decode(raw))
                    except ValueError:
                        size = len(raw)
                    out["data"][mime] = f"<{mime}: {size} bytes, left out of the reference>"
    return nb


def main(dist_dir, only):
    (HERE / "notebooks").mkdir(exist_ok=True)
    (HERE / "reference").mkdir(exist_ok=True)
    for name, package, version, dist, path in sources():
        if only and name not in only:
            continue
        if dist == "-":
            nb = nbformat.read(HERE / "notebooks" / f"{name}.ipynb", as_version=4)
        else:
            with zipfile.ZipFile(Path(dist_dir) / dist) as z:
                nb = nbformat.reads(z.read(path).decode("utf-8"), as_version=4)
        nb = stripped(nb)
        nbformat.write(nb, HERE / "notebooks" / f"{name}.ipynb")
        with tempfile.TemporaryDirectory() as cwd:
            client = NotebookClient(
                nb,
                timeout=30,
                allow_errors=True,
                kernel_name="python3",
                resources={"metadata": {"path": cwd}},
            )
            client.execute()
        nbformat.write(shorten_images(nb), HERE / "reference" / f"{name}.ipynb")
        print(f"{name}: {package} {version} {path}")


if __name__ == "__main__":
    main(sys.argv[1], set(sys.argv[2:]))
