"""scripts/pyspark_zip_bytecode.py: Spark's Python processes import pyspark from pyspark.zip; the venv's copy
carries bytecode so that none of them compiles pyspark again."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import zipfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(os.path.dirname(HERE), "scripts", "pyspark_zip_bytecode.py")


def _script():
    spec = importlib.util.spec_from_file_location("pyspark_zip_bytecode", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_modules_import_from_the_added_bytecode(tmp_path):
    path = tmp_path / "pkg.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("demo_pkg/__init__.py", "")
        z.writestr("demo_pkg/mod.py", "def f():\n    raise ValueError('from mod')\n")
    script = _script()
    assert script.add_bytecode(str(path)) == 2
    assert script.add_bytecode(str(path)) == 0  # once only
    probe = ("import traceback, demo_pkg.mod as m\n"
             "print(m.__file__)\n"
             "try:\n    m.f()\nexcept ValueError:\n    print(traceback.format_exc().splitlines()[-3])\n")
    out = subprocess.run([sys.executable, "-c", probe], env={**os.environ, "PYTHONPATH": str(path)},
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == f"{path}/demo_pkg/mod.pyc"
    # the traceback still names the module's source inside the zip
    assert f'"{path}/demo_pkg/mod.py", line 2' in out[1]


def test_the_venvs_pyspark_zip_has_bytecode():
    path = _script().default_zip()
    if not os.path.exists(path):
        pytest.fail(f"{path} missing: pyspark's install has no pyspark.zip")
    assert _script().has_bytecode(path), f"{path} has no bytecode: `make venv` runs scripts/pyspark_zip_bytecode.py"
