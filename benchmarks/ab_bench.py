"""Run one benchmark against two or more checkouts of the project, taking turns, in one run: the way to say
"within noise of the other checkout" on a machine whose load drifts over minutes (broker_bench or
spark_source_bench on two trees).

Each checkout needs its own .venv (`make venv` in it). Round after round, every checkout runs the same script
with the same arguments, from its own tree and interpreter, and the lines of its output that carry figures are
printed under the checkout's name with the load average before and after. The script is the checkout's own
unless --script-from names a checkout whose copy every checkout runs (copied in as benchmarks/_ab_<name>, removed
afterwards), so that a benchmark fixed later measures an older tree too.

    .venv/bin/python benchmarks/ab_bench.py --checkout before=/work/wt/x-before --checkout after=. \\
        --rounds 2 -- broker_bench.py --messages 200000
    .venv/bin/python benchmarks/ab_bench.py --checkout before=../x-before --checkout after=. --rounds 2 \\
        -- spark_source_bench.py --messages 1000000 --cases a,w --repeat 1 --dir /tmp/ab-spark

Output: each run's figure lines, then per checkout the same lines of every round side by side (read the ratios
across checkouts within one round; rounds show the noise). A run that fails prints its last lines and the
comparison goes on.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time

# Lines of a benchmark's output that hold its figures (numbers with a unit or a ratio).
FIGURE = re.compile(r"(msg/s|rows/s|MB/s|/s\b|\bms\b|\d\.\d+x|\bx faster|[a-z0-9]+/[a-z0-9]+ = |\(\d+\.\d+ s\))")


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def run_one(name: str, tree: str, script: str, args: list[str], timeout: float) -> tuple[list[str], float, int]:
    python = os.path.join(tree, ".venv", "bin", "python")
    if not os.access(python, os.X_OK):
        raise SystemExit(f"checkout {name}: no {python} (run `make venv` in {tree})")
    started = time.monotonic()
    env = dict(os.environ, PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python)
    try:
        out = subprocess.run([python, os.path.join(tree, "benchmarks", script), *args], cwd=tree, env=env,
                             capture_output=True, text=True, timeout=timeout)
        lines, code = (out.stdout + out.stderr).splitlines(), out.returncode
    except subprocess.TimeoutExpired as e:
        lines, code = (e.stdout or b"").decode(errors="replace").splitlines() + [f"timed out after {timeout} s"], -1
    return lines, time.monotonic() - started, code


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkout", action="append", required=True, metavar="NAME=PATH",
                    help="a checkout to measure (twice or more); each has its own .venv")
    ap.add_argument("--rounds", type=int, default=2, help="turns per checkout (alternating)")
    ap.add_argument("--script-from", metavar="NAME", help="run this checkout's copy of the script in every checkout")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds for one run")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- SCRIPT [ARGS...], SCRIPT under benchmarks/")
    a = ap.parse_args()
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        ap.error("name the benchmark: -- SCRIPT [ARGS...]")
    script, args = command[0].removeprefix("benchmarks/"), command[1:]
    trees = {}
    for spec in a.checkout:
        name, _, path = spec.partition("=")
        if not path:
            ap.error(f"--checkout {spec!r}: give NAME=PATH")
        trees[name] = os.path.abspath(path)
    run_script, copies = script, []
    if a.script_from:
        if a.script_from not in trees:
            ap.error(f"--script-from {a.script_from!r}: not one of the checkouts {sorted(trees)}")
        run_script = f"_ab_{script}"
        for tree in trees.values():
            target = os.path.join(tree, "benchmarks", run_script)
            shutil.copyfile(os.path.join(trees[a.script_from], "benchmarks", script), target)
            copies.append(target)
    for name, tree in trees.items():
        head = subprocess.run(["git", "-C", tree, "log", "-1", "--format=%h %s"], capture_output=True, text=True)
        print(f"{name}: {tree} at {head.stdout.strip()[:100]}", flush=True)
    print(f"{script} {' '.join(args)}; {a.rounds} round(s), {os.cpu_count()} cores", flush=True)
    figures: dict[str, list[list[str]]] = {name: [] for name in trees}
    try:
        for r in range(1, a.rounds + 1):
            for name, tree in trees.items():
                before = load()
                lines, seconds, code = run_one(name, tree, run_script, args, a.timeout)
                kept = [line for line in lines if FIGURE.search(line)]
                figures[name].append(kept)
                print(f"\n== round {r}, {name}: {seconds:.0f} s, exit {code}, load {before} -> {load()}", flush=True)
                for line in (kept if code == 0 else lines[-25:]):
                    print(f"   {line}", flush=True)
    finally:
        for path in copies:
            os.remove(path)
    print("\n== side by side (each checkout's rounds)")
    for name, rounds in figures.items():
        print(f"-- {name}")
        for i, kept in enumerate(rounds, 1):
            for line in kept:
                print(f"   r{i} {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
