"""The packages form one-way layers: a lower one never imports a higher one, and no two import each other; inside a
package, no modules import each other in a cycle (a lazy import inside a function counts: it hides a cycle, it
does not remove it)."""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# What each package may import of the others (the layers, bottom up).
ALLOWED = {
    "rmq_common": set(),  # RocketMQ's common module: the record codec, below the store and the clients
    "store": {"rmq_common"},
    "filters": {"rmq_common", "store"},
    "rmq_cli": {"rmq_common", "store", "filters", "rmq_broker", "remoting", "rmq_client", "rmq_acl", "rmq_log"},
    "rmq_spark": {"rmq_common", "store", "filters", "remoting", "rmq_client", "rmq_acl", "rmq_log"},
    "remoting": set(),  # the wire protocol knows nothing of the store
    "rmq_acl": {"remoting"},  # RocketMQ's acl module: request signing and checking, over the wire protocol only
    "rmq_broker": {"rmq_common", "store", "filters", "remoting", "rmq_acl"},
    # a client of brokers: never the broker, nor the store engine (the records it pulls are decoded by rmq_common)
    "rmq_client": {"rmq_common", "filters", "remoting", "rmq_acl"},
    # where the messages are, a store directory or brokers (MessageLog): below the command line
    "rmq_log": {"rmq_common", "store", "filters", "remoting", "rmq_client", "rmq_acl"},
}


def _imported(tree: ast.AST):
    """(line, module) of every absolute import in `tree`, a lazy one inside a function too."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def _imports(package: str) -> dict[str, set[tuple[str, int]]]:
    """{imported package: {(file, line)}} for every import of one of our packages by `package`."""
    found: dict[str, set[tuple[str, int]]] = {}
    for d, _, files in os.walk(os.path.join(ROOT, package)):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(d, name)
            tree = ast.parse(open(path, encoding="utf-8").read(), path)
            for lineno, n in _imported(tree):
                top = n.split(".")[0]
                if top in ALLOWED and top != package:
                    found.setdefault(top, set()).add((os.path.relpath(path, ROOT), lineno))
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_package_imports_only_the_layers_below_it(package):
    wrong = {k: sorted(v) for k, v in _imports(package).items() if k not in ALLOWED[package]}
    assert not wrong, f"{package} imports {wrong}"


def test_no_two_packages_import_each_other():
    edges = {(p, q) for p in ALLOWED for q in _imports(p)}
    assert not [(p, q) for p, q in edges if (q, p) in edges]


def _module_imports(root: str, package: str) -> dict[str, set[str]]:
    """{module: the modules of the same package it imports} (relative, absolute and function-level imports; a
    name imported from a package counts as its submodule when there is one)."""
    paths = {}
    for d, _, files in os.walk(os.path.join(root, package)):
        for name in files:
            if name.endswith(".py"):
                dotted = os.path.relpath(os.path.join(d, name), root)[:-3].replace(os.sep, ".")
                paths[dotted.removesuffix(".__init__")] = os.path.join(d, name)
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        here = module if path.endswith("__init__.py") else module.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(here.split(".")[:len(here.split(".")) - node.level + 1]) if node.level else ""
                source = ".".join(p for p in (base, node.module or "") if p)
                subs = [f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in paths]
                targets = subs or ([] if _extension_modules(root, source, node.names) else [source])
            else:
                continue
            for target in targets:
                while target and target not in paths:  # a name inside a module: the module
                    target = target.rpartition(".")[0]
                if target and target != module:
                    found.add(target)
        graph[module] = found
    return graph


def _extension_modules(root: str, package: str, names) -> bool:
    """Whether every name imported from `package` is a compiled module beside its sources (no .py file)."""
    folder = os.path.join(root, *package.split("."))
    return os.path.isdir(folder) and all(
        any(f.startswith(a.name + ".") and not f.endswith(".py") for f in os.listdir(folder)) for a in names)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_no_modules_of_a_package_import_each_other_in_a_cycle(package):
    assert _cycles(_module_imports(ROOT, package)) == []


def test_the_cycle_check_finds_a_cycle_hidden_in_a_function_and_passes_the_same_modules_without_it(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .cli import main\n")
    (pkg / "cli.py").write_text("from .serve import serve\n\ndef main():\n    serve()\n")
    (pkg / "serve.py").write_text("def serve():\n    from .cli import main\n    return main\n")
    (pkg / "common.py").write_text("X = 1\n")
    assert _cycles(_module_imports(str(tmp_path), "pkg")) == [["pkg.cli", "pkg.serve"]]
    (pkg / "serve.py").write_text("def serve():\n    from pkg import common\n    return common.X\n")
    assert _cycles(_module_imports(str(tmp_path), "pkg")) == []


def test_the_store_starts_without_the_filter_library_or_its_parser():
    code = "import store, sys; bad = [m for m in ('filters', 'lark', 'pyspark') if m in sys.modules]; print(bad)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


def test_a_client_loads_no_store_engine():
    """rmq_client decodes what it pulls with rmq_common's codec: a client process never imports store (nor
    filters, which imports it)."""
    code = ("import rmq_client, remoting, rmq_acl, sys; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('store', 'filters', 'rmq_broker')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


def test_the_store_holds_no_pull_requests():
    """Long polling is the broker's (rmq_broker/long_polling.py, RocketMQ's broker/longpolling): the store answers
    reads and signals arrivals; it keeps no event loop's requests (no asyncio) and no PullRequestHoldService."""
    found = [f"{path}:{n}" for path, text in _sources("store") for n, line in enumerate(text.splitlines(), 1)
             if re.search(r"\bimport asyncio\b|\bfrom asyncio\b|class PullRequestHoldService\b", line)]
    assert not found, f"long polling in the store: {found}"
    from rmq_broker.long_polling import PullRequestHoldService
    assert PullRequestHoldService.__module__ == "rmq_broker.long_polling"


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


def _sources(*folders: str):
    for folder in folders:
        for d, _, files in os.walk(os.path.join(ROOT, folder)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(d, name)
                    yield os.path.relpath(path, ROOT), open(path, encoding="utf-8").read()


def test_only_the_store_touches_its_files():
    """The broker, the clients, Spark and the tools read records through MessageStore (get_message_records,
    scan, ...), as RocketMQ's processors call only messageStore.getMessage: nothing else slices consume-queue
    units or reads the commitlog itself."""
    reach = re.compile(r"\bcq\.units\(|\bcommit_log\.")
    found = [f"{path}:{n}" for path, text in _sources(*(p for p in ALLOWED if p != "store"), "benchmarks")
             for n, line in enumerate(text.splitlines(), 1) if reach.search(line)]
    assert not found, f"reads of the store's files outside store/: {found}"


def _tests_of(name: str, tree: ast.AST) -> list[int]:
    """Lines where `name` (an attribute or a variable) is tested: an if/while/ternary/assert condition, a boolean
    operand, a comparison or a `not`."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
            tests = [node.test]
        elif isinstance(node, ast.BoolOp):
            tests = list(node.values)
        elif isinstance(node, ast.Compare):
            tests = [node.left, *node.comparators]
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            tests = [node.operand]
        else:
            continue
        for t in tests:
            for sub in ast.walk(t):
                if (isinstance(sub, ast.Attribute) and sub.attr == name) or (isinstance(sub, ast.Name)
                                                                             and sub.id == name):
                    lines.append(sub.lineno)
    return sorted(set(lines))


def _branches_on(names: set, tree: ast.AST) -> list[int]:
    """Lines inside functions where an if, while, ternary or boolean operand tests whether one of `names` is
    there (the name itself, `not` it, or a comparison of it; not a call through it)."""
    def tested(expr: ast.AST) -> list[ast.AST]:
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
            return tested(expr.operand)
        if isinstance(expr, ast.BoolOp):
            return [e for v in expr.values for e in tested(v)]
        if isinstance(expr, ast.Compare):
            return [expr.left, *expr.comparators]
        return [expr]

    lines = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, (ast.If, ast.While, ast.IfExp)):
                lines += [e.lineno for e in tested(node.test) if isinstance(e, ast.Name) and e.id in names
                          or isinstance(e, ast.Attribute) and e.attr in names]
    return sorted(set(lines))


@pytest.mark.parametrize("package", ["store", "rmq_common"])
def test_the_store_and_codec_choose_their_compiled_loops_once_at_import(package):
    """Compiled or fallback is a module-level binding made at import (record_encoder.KERNELS,
    consume_queue.write_units, native.crc32_spans, ...), never a branch on the compiled module at each call."""
    found = [f"{path}:{n}" for path, text in _sources(package)
             for n in _branches_on({"_encode", "_index", "_native"}, ast.parse(text, path))]
    assert not found, f"per-call branches on a compiled module: {found}"


def test_the_import_time_check_sees_a_branch_in_a_function_and_not_a_binding():
    per_call = "def f(x):\n    if _encode is None:\n        return x\n    return _encode.f(x)\n"
    binding = "f = _f_compiled if _encode is not None else _f_python\n"
    called = "def f(x):\n    if not _encode.f(x):\n        return x\n"
    assert _branches_on({"_encode"}, ast.parse(per_call)) == [2]
    assert _branches_on({"_encode"}, ast.parse(binding)) == _branches_on({"_encode"}, ast.parse(called)) == []


# Where the Spark source and sink choose between a store directory and a cluster, once.
BACKEND_CHOICE = {"rmq_spark/backend.py", "rmq_spark/options.py", "rmq_spark/sink/sink_options.py"}


def test_the_spark_source_and_sink_ask_for_a_cluster_only_where_they_choose_their_backend():
    found = [f"{path}:{n}" for path, text in _sources("rmq_spark") if path not in BACKEND_CHOICE
             for n in _tests_of("namesrv_addr", ast.parse(text, path))]
    assert not found, f"namesrv_addr tested outside the backend choice {sorted(BACKEND_CHOICE)}: {found}"


def test_the_backend_check_sees_a_test_of_namesrv_addr_and_not_its_use():
    tested = "def plan(self):\n    if not self.opts.use_index or self.opts.namesrv_addr:\n        return None\n"
    used = "def ranges(opts):\n    return [Range(opts.namesrv_addr, 1)]\n"
    assert _tests_of("namesrv_addr", ast.parse(tested)) == [2]
    assert _tests_of("namesrv_addr", ast.parse(used)) == []


# The modules that choose and open where the messages live without naming a place: they iterate rmq_log.places
# (each place declares its options, flags and log), so a new place is a module and an entry there.
PLACE_BLIND = ["rmq_log/open_log.py", "rmq_spark/options.py", "rmq_spark/backend.py", "rmq_spark/read_policy.py",
               "rmq_spark/sink/__init__.py", "rmq_spark/sink/sink_options.py", "rmq_spark/sink/writer.py",
               "rmq_cli/cli.py", "rmq_cli/common.py", "rmq_cli/consume_command.py", "rmq_cli/produce_command.py",
               "rmq_cli/topic_commands.py", "rmq_cli/admin_commands.py", "rmq_cli/query_commands.py"]
PLACE_NAMES = re.compile(r"(?i:namesrv)|StoreLog|ClusterLog|StorePlace|ClusterPlace|^STORE$|^CLUSTER$")
PLACE_MODULES = {"rmq_log.cluster_log", "rmq_log.cluster_place", "rmq_log.store_place"}


def _place_named(tree: ast.AST, addresses: set) -> list[int]:
    """Lines naming a place: an identifier (a name, attribute, argument or imported name) such as namesrv or
    StoreLog, an import of one place's module, or a text that is a place's address option or flag."""
    lines = []
    for node in ast.walk(tree):
        names = [node.id] if isinstance(node, ast.Name) else [node.attr] if isinstance(node, ast.Attribute) else \
            [node.arg] if isinstance(node, ast.arg) else [a.asname or a.name for a in node.names] + \
            [a.name for a in node.names] if isinstance(node, (ast.Import, ast.ImportFrom)) else \
            [k.arg for k in node.keywords if k.arg] if isinstance(node, ast.Call) else []
        if any(PLACE_NAMES.search(n) for n in names) or isinstance(node, ast.Constant) and \
                isinstance(node.value, str) and node.value.lower() in addresses:
            lines.append(node.lineno)
    lines += [n for n, module in _imported(tree) if module in PLACE_MODULES]
    return sorted(set(lines))


def test_the_source_sink_open_log_and_commands_choose_a_place_without_naming_one():
    from rmq_log import places

    addresses = {a.lower() for p in places.PLACES for a in (p.address_option, p.cli_flag)}
    found = [f"{path}:{n}" for path in PLACE_BLIND
             for n in _place_named(ast.parse(open(os.path.join(ROOT, path), encoding="utf-8").read(), path),
                                   addresses)]
    assert not found, f"a place named outside its declaration in rmq_log (ask rmq_log.places): {found}"


def test_the_place_check_sees_a_named_place_and_not_the_registry():
    named = ("from rmq_log.cluster_log import ClusterLog\n"
             "def f(opts):\n    return open_log(namesrv=opts.namesrv_addr)\n"
             "def g(opts):\n    return opts.get('namesrvAddr')\n")
    blind = "from rmq_log import places\ndef f(opts):\n    return places.for_reads(opts).reads(opts)\n"
    assert _place_named(ast.parse(named), {"namesrvaddr"}) == [1, 3, 5]
    assert _place_named(ast.parse(blind), {"namesrvaddr"}) == []


# The rmq_cli modules that may reach the store or the brokers' client themselves, and why: the others ask
# rmq_log's MessageLog, which open_log chooses once per command.
CLI_BELOW_THE_LOG = {
    "rmq_cli/serve.py": "runs brokers and name servers on a store",
    "rmq_cli/store_commands.py": "check, clean and recover act on a store directory's files; brokers have no such",
    "rmq_cli/doctor.py": "reports whether the store's compiled kernels are built",
    "rmq_cli/cli.py": "maps the store's errors to exit codes",
}


def _imports_of(text: str, path: str, packages: set) -> list[int]:
    return [lineno for lineno, n in _imported(ast.parse(text, path)) if n.split(".")[0] in packages]


def test_the_cli_commands_reach_messages_only_through_the_message_log():
    found = [f"{path}:{n}" for path, text in _sources("rmq_cli") if path not in CLI_BELOW_THE_LOG
             for n in _imports_of(text, path, {"store", "rmq_client"})]
    assert not found, f"rmq_cli modules importing store or rmq_client instead of rmq_log: {found}"
    assert all(os.path.exists(os.path.join(ROOT, path)) for path in CLI_BELOW_THE_LOG)


def test_the_message_log_check_sees_a_function_level_import_and_not_a_name():
    lazy = "def run(args):\n    from store.message_store import MessageStore\n    return MessageStore\n"
    named = "def run(store):\n    return store.topics()\n"
    assert _imports_of(lazy, "x.py", {"store"}) == [2]
    assert _imports_of(named, "x.py", {"store"}) == []


def test_the_cli_commands_do_not_ask_whether_they_work_through_brokers():
    found = [f"{path}:{n}" for path, text in _sources("rmq_cli") if path not in CLI_BELOW_THE_LOG
             for n in _tests_of("namesrv", ast.parse(text, path))]
    assert not found, f"--namesrv tested outside rmq_log.open_log: {found}"


def _getattr_on_a_store(tree: ast.AST, methods: set) -> list[int]:
    """Lines where getattr/hasattr looks something up on a store (a name or attribute named *store*) or looks up
    one of the store's methods by name on anything."""
    lines = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr",
                                                                                                     "hasattr")):
            continue
        target = node.args[0] if node.args else None
        named = target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) \
            else ""
        looked_up = node.args[1] if len(node.args) > 1 else None
        if "store" in named.lower() or (isinstance(looked_up, ast.Constant) and looked_up.value in methods):
            lines.append(node.lineno)
    return lines


def _read_store_methods() -> set:
    from rmq_log.reads import LogReads
    return {name for name in vars(LogReads) if not name.startswith("_")}


def test_the_spark_readers_ask_every_store_the_same_methods():
    """LogReads lists every method the readers call and both locations answer each: none is looked up to see
    whether this store has it."""
    methods = _read_store_methods()
    assert {"assigned", "bounds_tracker", "topics_version", "keep_checkpointed"} <= methods
    found = [f"{path}:{n}" for path, text in _sources("rmq_spark")
             for n in _getattr_on_a_store(ast.parse(text, path), methods)]
    assert not found, f"store methods looked up with getattr/hasattr: {found}"


# Names a queue goes by in rmq_spark (a (topic, queue) pair's second half, a loop's queue).
QUEUE_NAMES = {"q", "queue", "qid", "queue_id"}


def _asks_which_queue_key(tree: ast.AST) -> list[int]:
    """Lines that ask which place a queue belongs to: `names_brokers`, or whether a queue (QUEUE_NAMES) is an int
    or a QueueKey."""
    lines = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "names_brokers"]
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance" \
                and len(node.args) == 2 and isinstance(node.args[0], ast.Name) and node.args[0].id in QUEUE_NAMES:
            kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
            if any(isinstance(k, ast.Name) and k.id in ("int", "QueueKey") for k in kinds):
                lines.append(node.lineno)
    return sorted(lines)


def test_the_spark_readers_hold_one_queue_key_and_the_log_names_it():
    """A queue is (topic, QueueKey) in every place; how offsets JSON and messages name it ("3", "broker-a:3") is the
    log's (LogReads.queue_name, parse_queue): rmq_spark never asks whether a queue is an int or a QueueKey, nor
    whether the place names brokers."""
    assert {"queue_name", "parse_queue"} <= _read_store_methods()
    found = [f"{path}:{n}" for path, text in _sources("rmq_spark")
             for n in _asks_which_queue_key(ast.parse(text, path))]
    assert not found, f"rmq_spark asking which kind of queue key it holds: {found}"


def test_the_queue_key_check_sees_names_brokers_and_isinstance_of_a_queue():
    asks = "def f(store, q):\n    if store.names_brokers:\n        pass\n    return isinstance(q, (str, QueueKey))\n"
    other = "def f(value, q):\n    return isinstance(value, int) or isinstance(q, list)\n"
    assert _asks_which_queue_key(ast.parse(asks)) == [2, 4]
    assert _asks_which_queue_key(ast.parse(other)) == []


def test_the_store_lookup_check_sees_getattr_on_a_store_and_not_on_a_filter():
    on_store = "def f(self):\n    v = getattr(self.store, 'topics_version', None)\n"
    by_name = "def f(s):\n    return getattr(s, 'bounds_tracker')\n"
    other = "def f(flt):\n    return getattr(flt, 'attribute', None)\n"
    methods = {"topics_version", "bounds_tracker"}
    assert _getattr_on_a_store(ast.parse(on_store), methods) == [2]
    assert _getattr_on_a_store(ast.parse(by_name), methods) == [2]
    assert _getattr_on_a_store(ast.parse(other), methods) == []


def _option_names_read(tree: ast.AST, names) -> list[int]:
    """Lines of text constants that spell one of `names` (any case, as Spark hands option names lower-cased), and
    of imports of option_keys."""
    lower = {n.lower() for n in names}
    lines = [node.lineno for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lower() in lower]
    lines += [node.lineno for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
              and any(a.name == "option_keys" for a in node.names) or isinstance(node, ast.ImportFrom)
              and (node.module or "").endswith("option_keys")]
    return sorted(set(lines))


def test_the_sink_reads_its_options_in_one_parser():
    """sink/__init__ hands the options to sink_options.parse_sink_options and takes its writers from the backend
    that names: it spells no option name (no sniffing for namesrvAddr or sinkId)."""
    from rmq_spark import option_keys as K

    path = os.path.join(ROOT, "rmq_spark", "sink", "__init__.py")
    found = _option_names_read(ast.parse(open(path, encoding="utf-8").read(), path),
                               K.SINK_OPTIONS)
    assert not found, f"option names read in rmq_spark/sink/__init__.py at lines {found}"


def test_the_option_name_check_sees_a_sniffed_name_and_not_a_parsed_field():
    sniffed = "def f(options):\n    return any(k.lower() == 'namesrvaddr' for k in options)\n"
    keyed = "from .. import option_keys as K\n"
    parsed = "def f(options):\n    return parse(options).namesrv_addr\n"
    assert _option_names_read(ast.parse(sniffed), ("namesrvAddr",)) == [2]
    assert _option_names_read(ast.parse(keyed), ("namesrvAddr",)) == [1]
    assert _option_names_read(ast.parse(parsed), ("namesrvAddr",)) == []


def test_data_loss_is_reported_in_one_place():
    """Every failOnDataLoss decision goes through data_loss.report_data_loss: no other module words the advice
    or the warning."""
    found = [f"{path}:{node.lineno}" for path, text in _sources("rmq_spark") if path != "rmq_spark/data_loss.py"
             for node in ast.walk(ast.parse(text, path))
             if isinstance(node, ast.Constant) and isinstance(node.value, str)
             and ("Set failOnDataLoss" in node.value or "(failOnDataLoss=false)" in node.value)]
    assert not found, f"data loss reported outside rmq_spark/data_loss.py: {found}"


# What the Spark sink may import of rmq_log: the seam (MessageLog and its writes), the rows it stages, the places'
# registry and what a place declares (which parses the options), and no module of one place (a store directory's
# staging and commit, a cluster's halves and decisions).
SINK_SEAM = {"rmq_log", "rmq_log.writes", "rmq_log.staged_rows", "rmq_log.place", "rmq_log.places"}


def test_the_spark_sink_writes_only_through_the_message_log():
    found = [f"{path}:{n}" for path, text in _sources("rmq_spark/sink")
             for n in _imports_of(text, path, {"store", "rmq_client"})]
    found += [f"{path}:{n}" for path, text in _sources("rmq_spark/sink")
              for n, module in _imported(ast.parse(text, path))
              if module.split(".")[0] == "rmq_log" and module not in SINK_SEAM]
    assert not found, f"rmq_spark/sink importing a place's modules instead of rmq_log's writes: {found}"


def test_the_sink_seam_check_sees_a_place_module_and_not_the_seam():
    place = "def f():\n    from rmq_log.store_commit import commit_batch\n    from store import MessageStore\n"
    seam = "from rmq_log.writes import LogWrites\nfrom rmq_log import open_log\n"
    assert [m for _, m in _imported(ast.parse(place)) if m not in SINK_SEAM] == ["rmq_log.store_commit", "store"]
    assert [m for _, m in _imported(ast.parse(seam)) if m not in SINK_SEAM] == []

# The rmq_spark modules outside the sink that may import the store or the brokers' client themselves, and why:
# the source reads where the messages live only through rmq_log (MessageLog.reads), chosen once by open_log.
SOURCE_BELOW_THE_LOG = {
    "rmq_spark/demo.py": "writes the demo's store directory and checks it, beside the Spark jobs it runs",
}


def test_the_spark_source_reaches_messages_only_through_the_message_log():
    found = [f"{path}:{n}" for path, text in _sources("rmq_spark")
             if not path.startswith("rmq_spark/sink/") and path not in SOURCE_BELOW_THE_LOG
             for n in _imports_of(text, path, {"store", "rmq_client"})]
    assert not found, f"rmq_spark modules importing store or rmq_client instead of rmq_log: {found}"
    assert all(os.path.exists(os.path.join(ROOT, path)) for path in SOURCE_BELOW_THE_LOG)


def test_the_message_log_knows_nothing_of_spark():
    """rmq_log is where the messages live, for the command line and Spark alike: Spark's side hands it plain values
    (ReadSettings, WriteOptions, Arrow batches) and gets readers and receipts back. Its range readers run on Spark's
    executors, wrapped in a Spark partition by rmq_spark: rmq_log imports neither pyspark nor rmq_spark (not even
    lazily), and importing its readers and writers loads neither."""
    found = [f"{path}:{n}" for path, text in _sources("rmq_log")
             for n in _imports_of(text, path, {"pyspark", "rmq_spark"})]
    assert not found, f"rmq_log importing Spark: {found}"
    code = ("import rmq_log, rmq_log.store_reads, rmq_log.cluster_reads, rmq_log.index_runs, rmq_log.store_writes, "
            "rmq_log.cluster_writes, sys; "
            "print([m for m in ('pyspark', 'rmq_spark') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr
