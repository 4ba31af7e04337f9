"""Add compiled bytecode to pyspark's pyspark.zip, which pip's pyspark ships with sources only.

Every Python process Spark starts (workers forked by its daemon import pyspark.worker after the fork; the
driver-side planner and streaming source runners start fresh) imports pyspark from that zip, ahead of
site-packages on its PYTHONPATH. Python cannot write bytecode into a zip, so each process compiles what it
imports again: measured 1.6-1.7 s of CPU to import pyspark's worker and data source modules from the zip, 0.8 s
with this bytecode in it. The sources stay in the zip (tracebacks show them); the .pyc files are written beside
them (zipimport's layout) as unchecked-hash pycs, valid for exactly these sources (pip replaces the whole zip on
an upgrade).

    python scripts/pyspark_zip_bytecode.py [path/to/pyspark.zip]   # default: the running interpreter's pyspark
"""
from __future__ import annotations

import compileall
import os
import py_compile
import sys
import tempfile
import warnings
import zipfile


def default_zip() -> str:
    import pyspark
    return os.path.join(os.path.dirname(pyspark.__file__), "python", "lib", "pyspark.zip")


def has_bytecode(path: str) -> bool:
    with zipfile.ZipFile(path) as z:
        return any(n.endswith(".pyc") for n in z.namelist())


def add_bytecode(path: str) -> int:
    """Compile every module of the zip at `path` into it (replaced atomically); the number of .pyc files added,
    0 when it already has them."""
    if has_bytecode(path):
        return 0
    directory = os.path.dirname(os.path.abspath(path))
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        src = os.path.join(tmp, "src")
        with zipfile.ZipFile(path) as z:
            z.extractall(src)
        warnings.filterwarnings("ignore", category=SyntaxWarning)  # pyspark's own tests' code
        # ddir: the code objects name their files inside the zip, as when zipimport compiles them itself
        compileall.compile_dir(src, ddir=os.path.abspath(path), legacy=True, quiet=2, workers=0,
                               invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
        out = os.path.join(tmp, "pyspark.zip")
        added = 0
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
            for root, dirs, files in os.walk(src):
                dirs.sort()
                for name in sorted(files):
                    full = os.path.join(root, name)
                    z.write(full, os.path.relpath(full, src))
                    added += name.endswith(".pyc")
        os.replace(out, path)
    return added


def main(argv: list[str]) -> int:
    path = argv[1] if len(argv) > 1 else default_zip()
    added = add_bytecode(path)
    print(f"{path}: {added} modules compiled" if added else f"{path}: has bytecode already")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
