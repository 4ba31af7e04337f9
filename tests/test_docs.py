"""The documentation stays true to the code: README.md, docs/ and the notebooks link only to what exists, the
option tables of docs/reading.md and docs/writing.md name exactly the options rmq_spark/option_keys.py accepts, and
README's blocks marked runnable run on a fresh clone.

A fenced block is runnable when the line `<!-- runnable -->` comes before its opening fence (blank lines between
are allowed). The runnable blocks run in their order, in one fresh temporary directory, with this interpreter's
bin directory first on PATH (so `rmq` and `python` are the project's): a `sh`/`bash` block as one bash script
with -e, and python blocks that follow each other with no runnable shell block between them as one script, so
that one SparkSession serves a read example and the write example after it."""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rmq_spark import option_keys as K

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md")), *sorted((ROOT / "notebooks").glob("*.ipynb"))]
RUNNABLE = "<!-- runnable -->"
FENCE = re.compile(r"^(```|~~~)\s*([\w+-]*)")
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]\n]*\]\(([^)\s]+)\)")
INLINE_CODE = re.compile(r"`[^`\n]*`")


def page_text(path: Path) -> str:
    """A page's markdown: a notebook's is its markdown cells'."""
    if path.suffix != ".ipynb":
        return path.read_text()
    cells = json.loads(path.read_text())["cells"]
    return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line outside fenced code blocks."""
    out, fence = [], None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line.strip())
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None and line.strip().startswith(fence):
            fence = None
        elif fence is None:
            out.append((n, line))
    return out


def slug(heading: str) -> str:
    """The anchor GitHub (and GitLab) give a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found, count = set(), {}  # a heading seen before gets -1, -2, ... as on GitHub
    for _, line in prose_lines(path.read_text()):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            count[base] = count.get(base, -1) + 1
            found.add(base if count[base] == 0 else f"{base}-{count[base]}")
    return found


def links(path: Path) -> list[tuple[int, str]]:
    out = []
    for n, line in prose_lines(page_text(path)):
        for m in LINK.finditer(INLINE_CODE.sub("", line)):
            out.append((n, m.group(1) or m.group(2)))
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for n, target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...: not ours to check
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        where = f"{page.relative_to(ROOT)}:{n}: {target}"
        if not dest.exists():
            broken.append(f"{where}: no such file or directory")
        elif not dest.is_relative_to(ROOT):
            broken.append(f"{where}: outside the repository")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{where}: no heading with that anchor in {dest.relative_to(ROOT)}")
    assert not broken, "broken links:\n" + "\n".join(broken)


def table_options(page: Path) -> dict[str, int]:
    """Option names in the first column of the page's tables headed `| option |`: {name: line}."""
    names: dict[str, int] = {}
    in_table = False
    for n, line in prose_lines(page.read_text()):
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.lstrip().startswith("|") else None
        if cells is None:
            in_table = False
        elif cells[0] == "option":
            in_table = True
        elif in_table and not set(cells[0]) <= set("-: "):
            for name in re.findall(r"`([A-Za-z][A-Za-z0-9.]*)`", cells[0]):
                names.setdefault(name, n)
    return names


def option_names() -> dict[str, str]:
    """Every option key rmq_spark/option_keys.py defines: {value: constant name}."""
    return {v: k for k, v in vars(K).items() if k.isupper() and isinstance(v, str)}


def test_every_option_key_is_accepted_somewhere():
    accepted = set(K.SOURCE_OPTIONS) | set(K.SINK_OPTIONS)
    orphans = {k: v for v, k in option_names().items() if v not in accepted}
    assert not orphans, (f"rmq_spark/option_keys.py defines {orphans} but neither SOURCE_OPTIONS nor SINK_OPTIONS "
                         "holds it: add it there and a row to the option tables in docs/")


@pytest.mark.parametrize("page, accepted, what", [
    ("reading.md", K.SOURCE_OPTIONS, "SOURCE_OPTIONS (the source)"),
    ("writing.md", K.SINK_OPTIONS, "SINK_OPTIONS (the sinks)"),
])
def test_option_tables_match_the_options_accepted(page, accepted, what):
    documented = table_options(DOCS / page)
    missing = sorted(set(accepted) - set(documented))
    unknown = sorted(f"{name} (line {line})" for name, line in documented.items() if name not in accepted)
    assert not missing, (f"options in rmq_spark/option_keys.py's {what} without a row in the option tables of "
                         f"docs/{page}: {missing}")
    assert not unknown, f"docs/{page} documents options that {what} does not accept: {unknown}"


def runnable_blocks(page: Path) -> list[tuple[int, str, str]]:
    """(line, language, code) of every block marked runnable, in order."""
    lines = page.read_text().split("\n")
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() != RUNNABLE:
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        m = FENCE.match(lines[j].strip()) if j < len(lines) else None
        assert m, f"{page.name}:{i + 1}: {RUNNABLE} is not followed by a fenced code block"
        lang, k = m.group(2) or "sh", j + 1
        while not lines[k].strip().startswith(m.group(1)):
            k += 1
        assert lang in ("sh", "bash", "shell", "python"), f"{page.name}:{j + 1}: cannot run a {lang!r} block"
        blocks.append((j + 1, "python" if lang == "python" else "sh", "\n".join(lines[j + 1:k]) + "\n"))
    return blocks


def scripts(blocks: list[tuple[int, str, str]]) -> list[tuple[str, str, str]]:
    """The blocks as scripts to run in order: (language, where, code), consecutive python blocks joined."""
    out: list[tuple[str, str, str]] = []
    for line, lang, code in blocks:
        if out and lang == "python" and out[-1][0] == "python":
            out[-1] = ("python", f"{out[-1][1]}, {line}", out[-1][2] + code)
        else:
            out.append((lang, f"README.md:{line}", code))
    return out


def test_the_first_read_and_write_are_runnable():
    readme = (ROOT / "README.md").read_text()
    for section in ("## First read", "## First write"):
        body = readme.split(section, 1)[1].split("\n## ", 1)[0]
        assert RUNNABLE in body, f"README's '{section}' has no block marked {RUNNABLE}"


def test_runnable_readme_blocks_run_in_a_fresh_directory(tmp_path):
    todo = scripts(runnable_blocks(ROOT / "README.md"))
    assert todo
    bin_dir = os.path.dirname(sys.executable)
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""),
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)  # and conftest's driver flags
    for n, (lang, where, code) in enumerate(todo):
        script = tmp_path / f"block{n}.{'py' if lang == 'python' else 'sh'}"
        script.write_text(code)
        argv = [sys.executable, str(script)] if lang == "python" else ["bash", "-e", "-o", "pipefail", str(script)]
        # the timeout only keeps a hung block from hanging the suite
        proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
        assert proc.returncode == 0, (f"the runnable block at {where} failed (exit {proc.returncode}):\n{code}\n"
                                      f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")


def test_rmq_help_and_each_commands_help_name_an_existing_docs_page():
    from rmq_cli.cli import build_parser
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    for name, command in [("rmq", parser), *commands.items()]:
        pages = re.findall(r"docs/[\w-]+\.md", " ".join(command.format_help().split()))
        assert pages, f"`{name} --help` names no docs/ page"
        assert all((ROOT / page).is_file() for page in pages), f"`{name} --help` names {pages}"
