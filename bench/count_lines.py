"""Count the library's lines, by kind: code, docstrings, comments and blank lines.

Counts every ``.py`` file under ``mcp_django/`` but its migrations (issue 27's measure of the
library's size), in the work tree or at a git revision:

    python bench/count_lines.py                 # the work tree
    python bench/count_lines.py --rev d3ee4e5   # a revision (read from git, nothing checked out)
    python bench/count_lines.py --by-file       # each file too, largest first

A line is a docstring's when it lies in a module's, class's or function's docstring, a comment's
when a comment is all it holds, and blank when it holds nothing else; every other line is code.
"""

from __future__ import annotations

import argparse
import ast
import io
import subprocess
import tokenize
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("code", "doc", "comment", "blank")


def kinds(source: str) -> Counter[str]:
    """How many of ``source``'s lines are of each kind."""
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                docstrings.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    comments: set[int] = set()
    code: set[int] = set()
    quiet = (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments.add(token.start[0])
        elif token.type not in quiet:
            code.update(range(token.start[0], token.end[0] + 1))
    counted: Counter[str] = Counter()
    for number, line in enumerate(source.splitlines(), 1):
        if number in docstrings:
            counted["doc"] += 1
        elif number in code:
            counted["code"] += 1
        elif number in comments:
            counted["comment"] += 1
        elif not line.strip():
            counted["blank"] += 1
        else:
            counted["code"] += 1
    return counted


def library_files(rev: str | None) -> dict[str, str]:
    """The library's files (path -> source), migrations aside, in the work tree or at ``rev``."""
    if rev is None:
        paths = sorted(ROOT.glob("mcp_django/**/*.py"))
        return {str(p.relative_to(ROOT)): p.read_text() for p in paths if "migrations" not in p.parts}
    listed = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", rev, "--", "mcp_django"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    wanted = [p for p in listed if p.endswith(".py") and "/migrations/" not in p]
    return {
        path: subprocess.run(
            ["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout
        for path in wanted
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", help="count at this git revision instead of the work tree")
    parser.add_argument("--by-file", action="store_true", help="print each file's count too")
    args = parser.parse_args()
    files = {path: kinds(source) for path, source in library_files(args.rev).items()}
    if args.by_file:
        for path, counted in sorted(files.items(), key=lambda item: -item[1].total()):
            print(f"{counted.total():6} {path}  " + "  ".join(f"{kind} {counted[kind]}" for kind in KINDS))
    total: Counter[str] = sum(files.values(), Counter())
    print(f"{total.total()} lines in {len(files)} modules: " + ", ".join(f"{kind} {total[kind]}" for kind in KINDS))


if __name__ == "__main__":
    main()
