"""The packages form one-way layers: a lower one never imports a higher one, and no two import each other."""
from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# What each package may import of the others (the layers, bottom up).
ALLOWED = {
    "store": set(),
    "filters": {"store"},
    "rmq_cli": {"store", "filters", "broker", "remoting", "rmq_client", "acl"},
    "rmq_spark": {"store", "filters", "remoting", "rmq_client", "acl"},
    "remoting": set(),  # the wire protocol knows nothing of the store
    "acl": {"remoting"},  # RocketMQ's acl module: request signing and checking, over the wire protocol only
    "broker": {"store", "filters", "remoting", "acl"},
    "rmq_client": {"store", "filters", "remoting", "acl"},  # a client of brokers: never the broker itself
}


def _imports(package: str) -> dict[str, set[tuple[str, int]]]:
    """{imported package: {(file, line)}} for every import of one of our packages by `package`."""
    found: dict[str, set[tuple[str, int]]] = {}
    for d, _, files in os.walk(os.path.join(ROOT, package)):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(d, name)
            tree = ast.parse(open(path, encoding="utf-8").read(), path)
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for n in names:
                    top = n.split(".")[0]
                    if top in ALLOWED and top != package:
                        found.setdefault(top, set()).add((os.path.relpath(path, ROOT), node.lineno))
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_package_imports_only_the_layers_below_it(package):
    wrong = {k: sorted(v) for k, v in _imports(package).items() if k not in ALLOWED[package]}
    assert not wrong, f"{package} imports {wrong}"


def test_no_two_packages_import_each_other():
    edges = {(p, q) for p in ALLOWED for q in _imports(p)}
    assert not [(p, q) for p, q in edges if (q, p) in edges]


def test_the_store_starts_without_the_filter_library_or_its_parser():
    code = "import store, sys; bad = [m for m in ('filters', 'lark', 'pyspark') if m in sys.modules]; print(bad)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


def test_the_filter_library_implements_the_stores_filter_interface():
    from filters import MessageFilter
    from store.message_filter import BatchMessageFilter
    assert isinstance(MessageFilter.by_sql("a > 1"), BatchMessageFilter)


def test_the_filter_library_knows_nothing_of_spark():
    code = "import filters, sys; print([m for m in ('pyspark', 'rmq_spark') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


def test_no_class_name_is_defined_in_two_packages():
    """One name per thing: a class name names one class across the project's packages (a private _Name may repeat),
    so that `MessageQueue` or `PullRequestHoldService` means the same wherever it is read."""
    where: dict[str, set[str]] = {}
    for package in ALLOWED:
        for d, _, files in os.walk(os.path.join(ROOT, package)):
            for name in files:
                if not name.endswith(".py"):
                    continue
                path = os.path.join(d, name)
                tree = ast.parse(open(path, encoding="utf-8").read(), path)
                for node in ast.walk(tree):
                    if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                        where.setdefault(node.name, set()).add(package)
    twice = {name: sorted(packages) for name, packages in where.items() if len(packages) > 1}
    assert not twice, f"class names defined in more than one package: {twice}"
