"""The results pages, generated from the measurements in docs/bench/*.json (one script for all).

Every benchmark script in bench/ appends its rows to a JSON file in docs/bench/ (the JSON keeps
the history: one row per run, each with its command and machine). This script writes, for each
of those files, a page ``docs/results/<name>.md`` with

* the **current table**: of the rows that measure the same configuration (the same values of the
  fields in :data:`KEY_FIELDS` the file has) on the same machine, the latest one;
* the **command** that produced each row, with the file-level one where a row has none;
* the **machine** of each row (CPU, SIMD level, cores, RAM);
* the file's other fields (settings, sweeps, sub-tables) below the table;

and ``docs/results.md``, the index of those pages. No page is edited by hand; the test suite
(tests/test_docs_site.py) runs ``--check`` and fails on a page that differs from what its JSON
gives.

    python bench/results.py            # (re)write docs/results.md and docs/results/*.md
    python bench/results.py --check    # exit 1 naming each stale or missing page; write nothing
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import tempfile
from pathlib import Path

from _common import md_table  # bench/_common.py: the script's folder is on sys.path

ROOT = Path(__file__).resolve().parent.parent
BENCH_JSON = ROOT / "docs" / "bench"
PAGES = ROOT / "docs" / "results"
INDEX = ROOT / "docs" / "results.md"

#: Fields that name a configuration (in this order in the tables); rows equal on the ones a file
#: has, and measured on the same machine, are the same configuration and the latest counts.
KEY_FIELDS = ("name", "preset", "router", "step", "retriever", "kind", "dense_index", "factory", "embedder",
              "build", "config", "deadline", "answers", "label", "llm", "index", "questions", "classifier",
              "encoder_eval", "threads_per_actor")
#: Fields shown elsewhere on the page (or paths that mean nothing to a reader).
NOT_COLUMNS = {"command", "commands", "date", "machine", "lib_dir", "rounds", "superseded_by"}
#: A string longer than this is not a table cell (it goes to the fields below the table).
MAX_CELL = 60


def _script(command: str | None) -> str | None:
    """``bench/x.py`` of a recorded command (``python bench/x.py ...``), or None."""
    for word in (command or "").split():
        if word.startswith("bench/") and word.endswith(".py"):
            return word
    return None


def _purpose(script: str | None) -> str:
    """First paragraph of the bench script's module docstring (one line), or empty."""
    if not script or not (ROOT / script).is_file():
        return ""
    doc = ast.get_docstring(ast.parse((ROOT / script).read_text(encoding="utf-8"))) or ""
    return " ".join(doc.split("\n\n")[0].split())


def machine_text(m) -> str:
    """One line for a recorded machine: the shapes the bench scripts have written over time
    (``bench._common.machine()``'s dict, llama_speed's ``cpu_flags``/``nproc``, a plain string)."""
    if not m:
        return "not recorded"
    if isinstance(m, str):
        return m
    if "cpu_flags" in m:
        flags = set(m["cpu_flags"])
        simd = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
        return f"{simd}, {m.get('nproc')} cores"
    simd = f" ({m['simd']})" if m.get("simd") else ""
    ram = f", {m['ram_gib']} GiB RAM" if m.get("ram_gib") else ""
    return f"{m.get('cpu', '?')}{simd}, {m.get('cores', '?')} cores{ram}"


def cell(v) -> str:
    """A table cell: floats to 4 significant digits, ``|`` escaped."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, dict):  # a small settings dict (e.g. a row's overrides)
        return ", ".join(f"{k}={cell(x)}" for k, x in v.items())
    return str(v).replace("|", "\\|").replace("\n", " ")


def _is_cell(v) -> bool:
    if isinstance(v, dict):
        return all(isinstance(x, (bool, int, float, str)) for x in v.values()) and len(cell(v)) <= MAX_CELL
    return v is None or isinstance(v, (bool, int, float)) or (isinstance(v, str) and len(v) <= MAX_CELL)


def split_rows(data) -> tuple[list[dict], dict]:
    """(rows, file-level fields) of a bench JSON: a list of rows, a dict with ``rows``, or one
    record (a dict without rows: no table, its fields are listed)."""
    if isinstance(data, list):
        return [r for r in data if isinstance(r, dict)], {}
    if isinstance(data.get("rows"), list):
        return data["rows"], {k: v for k, v in data.items() if k != "rows"}
    return [], data


def _key_fields(rows: list[dict]) -> list[str]:
    """The fields of :data:`KEY_FIELDS` that some row has, in that order."""
    return [k for k in KEY_FIELDS if any(k in r for r in rows)]


def _machine_of(row: dict, meta: dict) -> str:
    """The row's machine (the file's where the row has none), as :func:`machine_text` writes it."""
    return machine_text(row.get("machine", meta.get("machine")))


def _script_of(stem: str, rows: list[dict], meta: dict) -> str | None:
    """The bench script that wrote a file: the one its recorded commands run, else
    ``bench/<stem>.py`` when it exists, else None."""
    commands = [c for c in [meta.get("command"), *[r.get("command") for r in rows]] if c]
    return next((s for s in map(_script, commands) if s), None) or (
        f"bench/{stem}.py" if (ROOT / "bench" / f"{stem}.py").is_file() else None)


def current_rows(rows: list[dict], meta: dict) -> list[tuple[int, dict]]:
    """(1-based position in the JSON, row) of the latest row per configuration and machine, in
    the order the latest rows were written. A file whose rows have none of :data:`KEY_FIELDS`
    is a sweep: every row is current. A row with ``superseded_by`` (why, e.g. "row 38: the same
    preset on 200 questions") is history only: it stays in the JSON, not in the current table."""
    keys = _key_fields(rows)
    if not keys:
        return [(i, r) for i, r in enumerate(rows, 1) if not r.get("superseded_by")]
    latest: dict[tuple, tuple[int, dict]] = {}
    for i, r in enumerate(rows, 1):
        if r.get("superseded_by"):  # history: a later row of the same setting measured more
            continue
        ident = tuple(json.dumps(r.get(k), sort_keys=True) for k in keys) + (_machine_of(r, meta),)
        latest.pop(ident, None)
        latest[ident] = (i, r)
    return list(latest.values())


def columns(rows: list[dict]) -> list[str]:
    """Key fields first, then every field that is a table cell in some row, in first-seen order."""
    cols = _key_fields(rows)
    for r in rows:
        for k, v in r.items():
            if k not in cols and k not in NOT_COLUMNS and _is_cell(v) and v is not None:
                cols.append(k)
    return cols


def _records(v) -> bool:
    """A dict of two or more dicts (named records, e.g. candidates by name): shown as a table."""
    return isinstance(v, dict) and len(v) >= 2 and all(isinstance(x, dict) for x in v.values())


def _flat(d: dict, prefix: str = "") -> list[tuple[str, object]]:
    """``a.b`` -> value pairs of a nested dict's cells (lists shown by length, unless short scalars)."""
    out = []
    for k, v in d.items():
        name = f"{prefix}{k}"
        if k in ("machine", "date", "command", "commands"):
            continue
        if _records(v):
            continue  # its own table
        if isinstance(v, dict):
            out += _flat(v, name + ".")
        elif isinstance(v, list):
            if all(_is_cell(x) for x in v) and len(v) <= 8:
                out.append((name, ", ".join(cell(x) for x in v)))
            elif not all(isinstance(x, dict) for x in v):
                out.append((name, f"{len(v)} entries (see the JSON)"))
        else:
            out.append((name, v))
    return out


def _rows(ix: list[int]) -> str:
    return ("row " if len(ix) == 1 else "rows ") + ", ".join(map(str, ix))


def _table(rows: list[dict], cols: list[str], first: str | None = None, firsts: list | None = None) -> list[str]:
    """:func:`_common.md_table` of ``rows`` with every value shown by :func:`cell` (``…`` for what
    is no table cell), ``first`` a leading column holding ``firsts``."""
    lead = [" first"] if first else []  # its own key: a record may have a field of the same name
    shown = [{**({" first": cell(firsts[j])} if first else {}),
              **{c: cell(r.get(c)) if _is_cell(r.get(c)) else "…" for c in cols}} for j, r in enumerate(rows)]
    return md_table(shown, lead + cols, head=([first] if first else []) + cols)


def page(stem: str, data) -> str:
    """The Markdown page of one bench JSON file."""
    rows, meta = split_rows(data)
    script = _script_of(stem, rows, meta)
    lines = [f"# {stem}", "",
             f"Generated by `python bench/results.py` from [docs/bench/{stem}.json](../bench/{stem}.json); "
             "do not edit (the JSON keeps every run).", ""]
    if script:
        purpose = _purpose(script)
        lines += [f"Measured by `{script}`" + (f": {purpose}" if purpose else "."), ""]
    if rows:
        cur = current_rows(rows, meta)
        cols = columns([r for _, r in cur])
        lines += [f"## Current rows ({len(cur)} of {len(rows)})", "",
                  "The latest row of each configuration on each machine; `#` is the row's position in the JSON.",
                  "", *_table([r for _, r in cur], cols, "#", [i for i, _ in cur]), ""]
        by_cmd: dict[str, list[int]] = {}
        by_machine: dict[str, list[int]] = {}
        for i, r in cur:
            c = r.get("command") or meta.get("command")
            by_cmd.setdefault(c or "not recorded", []).append(i)
            by_machine.setdefault(_machine_of(r, meta), []).append(i)
        lines += ["## Commands", ""]
        lines += [f"- {_rows(ix)}: `{c}`" if c != "not recorded" else f"- {_rows(ix)}: not recorded"
                  for c, ix in by_cmd.items()]
        lines += ["", "## Machines", ""]
        lines += [f"- {_rows(ix)}: {m}" for m, ix in by_machine.items()]
        dates = sorted({str(r.get("date") or meta.get("date") or "")[:10] for _, r in cur} - {""})
        if dates:
            lines += ["", f"Dates of these rows: {', '.join(dates)}."]
        lines.append("")
    else:
        lines += [f"Command: `{meta['command']}`" if meta.get("command") else "Command: not recorded", "",
                  f"Machine: {machine_text(meta.get('machine'))}" + (
                      f"; date {str(meta['date'])[:10]}." if meta.get("date") else "."), ""]
    extra = {k: v for k, v in meta.items() if k not in ("command", "machine", "date")}
    fields = _flat(extra)
    if fields:
        lines += ["## Fields" if rows else "## Figures", "",
                  *md_table([{"field": k, "value": cell(v) if _is_cell(v) else "…"} for k, v in fields],
                            ["field", "value"]), ""]

    def sub_tables(name: str, v) -> None:
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            lines.extend([f"## {name}", "", *_table(v, columns(v)), ""])
        elif _records(v):
            recs = list(v.values())
            lines.extend([f"## {name}", "", *_table(recs, columns(recs), "name", list(v)), ""])
        elif isinstance(v, dict):
            for kk, vv in v.items():
                sub_tables(f"{name}.{kk}", vv)

    for k, v in extra.items():
        sub_tables(k, v)
    return "\n".join(lines).rstrip() + "\n"


def index_page(files: dict[str, object]) -> str:
    """docs/results.md: one line per benchmark page."""
    lines = ["# Measured results", "",
             "Every figure in these pages comes from a JSON file in `docs/bench/`, written by a script in `bench/` "
             "with the command and the machine beside each row. The pages are generated by "
             "`python bench/results.py` (the tests fail when one is stale); the JSON keeps every run.", "",
             "What the figures mean, and which setting to choose from them: [presets](presets.md) (the preset "
             "ladder), [indexing](indexing.md), [throughput](throughput.md), [models](models.md), "
             "[testing](testing.md). `preqrag eval`'s report of the default pipeline's smoke answers is in "
             "`docs/bench/smoke_eval/`.", ""]
    table = []
    for stem, data in files.items():
        rows, meta = split_rows(data)
        script = _script_of(stem, rows, meta) or ""
        cur = current_rows(rows, meta) if rows else []
        machines = sorted({_machine_of(r, meta) for _, r in cur} if rows else {machine_text(meta.get("machine"))})
        table.append({"benchmark": f"[{stem}](results/{stem}.md)", "measured by": f"`{script}`",
                      "current / all rows": f"{len(cur)} / {len(rows)}" if rows else "one record",
                      "machines": "; ".join(machines)})
    lines += md_table(table, ["benchmark", "measured by", "current / all rows", "machines"])
    return "\n".join(lines) + "\n"


def render() -> dict[Path, str]:
    """Every results page (path -> text) from the JSON files as they are now."""
    files = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(BENCH_JSON.glob("*.json"))}
    out = {PAGES / f"{stem}.md": page(stem, data) for stem, data in files.items()}
    out[INDEX] = index_page(files)
    return out


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="name stale or missing pages and exit 1; write nothing")
    args = ap.parse_args(argv)
    pages = render()
    stale = [p for p, text in pages.items() if not p.is_file() or p.read_text(encoding="utf-8") != text]
    extra = sorted(set(PAGES.glob("*.md")) - set(pages)) if PAGES.is_dir() else []
    if args.check:
        for p in stale:
            print(f"stale: {p.relative_to(ROOT)} (run python bench/results.py)")
        for p in extra:
            print(f"no JSON for: {p.relative_to(ROOT)} (its docs/bench/*.json is gone; delete the page)")
        return 1 if stale or extra else 0
    for p in stale:
        _write(p, pages[p])
    for p in extra:
        p.unlink()
    print(f"{len(stale)} of {len(pages)} pages written, {len(extra)} removed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
