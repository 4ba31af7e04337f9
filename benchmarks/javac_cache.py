"""A benchmark's Java source compiled once: the classes live under a folder named by the source's hash."""
from __future__ import annotations

import hashlib
import os
import subprocess


def compiled(src: str, jars: str, cache: str) -> str:
    """The classes folder of `src` (javac against the jars in the folder `jars`), under `cache`."""
    out = os.path.join(cache, "classes", hashlib.sha256(open(src, "rb").read()).hexdigest()[:16])
    if not os.path.exists(os.path.join(out, ".complete")):
        subprocess.run(["javac", "-nowarn", "-d", out, "-cp", os.path.join(jars, "*"), src], check=True, timeout=300)
        open(os.path.join(out, ".complete"), "w").close()
    return out
