"""One entry for the bench studies, from the repository root:

    python -m bench                      # the studies, each with the start of its docstring
    python -m bench NAME [args]          # study NAME, as `python bench/NAME.py [args]` runs it

A study is a module of bench/ with ``run(argv=None) -> int`` (the exit status); what it shares with
the others is in bench/harness.py. ``python -m bench NAME`` runs ``run(args)`` with ``sys.argv`` and
``sys.path`` as ``python bench/NAME.py`` has them (``sys.argv[0]`` the script, its folder first on the
path), so the options, the output and the command a row records are the same either way.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
USAGE = ("usage: python -m bench NAME [args]   (study NAME, as python bench/NAME.py [args])\n"
         "       python -m bench                (this list)")
NOT_STUDIES = {"harness"}
"""Modules of bench/ that are no study (``_*.py`` neither)."""


def studies() -> dict[str, Path]:
    """``{name: path}`` of the studies in bench/, by name."""
    return {p.stem: p for p in sorted(HERE.glob("*.py")) if not p.name.startswith("_") and p.stem not in NOT_STUDIES}


def summary(path: Path) -> str:
    """The first paragraph of a study's docstring on one line (read, not imported)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return " ".join(doc.split("\n\n")[0].split())


def listing() -> str:
    """Usage and the studies, one line each."""
    found = studies()
    width = max(map(len, found))
    lines = [USAGE, "", f"{len(found)} studies (bench/NAME.py):"]
    lines += [f"  {name:<{width}}  " + textwrap.shorten(summary(path), 110 - width, placeholder=" …")
              for name, path in found.items()]
    return "\n".join(lines)


def _script(path: Path) -> str:
    """``path`` as ``python bench/NAME.py`` is typed from the repository root: relative to the
    current directory when under it, else absolute."""
    rel = os.path.relpath(path)
    return str(path) if rel.startswith("..") else rel


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(listing())
        return 0
    name, rest = argv[0], argv[1:]
    found = studies()
    if name not in found:
        print(f"python -m bench: no study {name!r} in {_script(HERE)}/ (python -m bench lists them)", file=sys.stderr)
        return 2
    path = found[name]
    sys.argv = [_script(path), *rest]  # argparse's prog and the recorded commands, as the script has them
    sys.path.insert(0, str(HERE))  # the study's siblings (harness, another study's public helpers)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # `from NAME import x` in a sibling finds this module, not a second copy
    spec.loader.exec_module(module)
    return module.run(rest)


if __name__ == "__main__":
    raise SystemExit(main())
