"""The results pages, generated from the measurements in docs/bench/*.json (one script for all).

Every benchmark script in bench/ appends its rows to a JSON file in docs/bench/ (the JSON keeps
the history: one row per run, each with its command and machine). This script writes, for each
of those files, a page ``docs/results/<name>.md`` with

* the **current table**: of the rows that measure the same configuration (the same values of the
  fields in :data:`KEY_FIELDS` the file has) on the same machine, the latest one;
* the **command** that produced each row, with the file-level one where a row has none;
* the **machine** of each row (CPU, SIMD level, cores, RAM);
* the file's other fields (settings, sweeps, sub-tables) below the table, its notes (a
  ``note`` or ``method`` string the script wrote: what the page used to say in prose) as
  paragraphs;

and ``docs/results.md``, the index of those pages. These pages are the only rendering of the JSON
(the bench scripts write no Markdown of their own). Nothing that tells rows apart is cut: a key
field is shown whole, a settings dict by what differs between the rows, a longer text below its
table. No page is edited by hand; the test suite
(tests/unit/repo/test_docs_site.py) runs ``--check`` and fails on a page that differs from what its JSON
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

from harness import md_table  # bench/harness.py: the script's folder is on sys.path

from preqrag.core.config import renamed_tables

ROOT = Path(__file__).resolve().parent.parent
BENCH_JSON = ROOT / "docs" / "bench"
PAGES = ROOT / "docs" / "results"
INDEX = ROOT / "docs" / "results.md"

#: Fields that name a configuration (in this order in the tables); rows equal on the ones a file
#: has, and measured on the same machine, are the same configuration and the latest counts.
KEY_FIELDS = ("name", "preset", "router", "step", "retriever", "kind", "dense_index", "factory", "embedder",
              "build", "config", "deadline", "answers", "label", "llm", "index", "questions", "classifier",
              "encoder_eval", "threads_per_actor")
#: Fields that, beside the key fields, tell a sweep's rows apart (the size measured, a swept
#: setting): rows of one configuration that differ in one are different measurements, all current.
SWEEP_FIELDS = ("n_questions", "passages", "workers", "num_pred_tokens", "hnsw_ef_construction")
#: Fields shown elsewhere on the page (or paths that mean nothing to a reader).
NOT_COLUMNS = {"command", "commands", "date", "machine", "lib_dir", "rounds", "superseded_by"}
#: A string longer than this is not a table cell: it goes below the table (a key field's value
#: excepted: it is shown whole), a file-level one as a paragraph.
MAX_CELL = 60
#: A list of more scalars than this is shown by its length (see the JSON).
MAX_LIST = 50
#: Entries the current rows' lists of records (a sweep inside each row) may hold together to be
#: shown as one table below the rows; more are counted (see the JSON).
MAX_ROW_RECORDS = 100


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
    (``bench.harness.machine()``'s dict, llama_speed's ``cpu_flags``/``nproc``, a plain string)."""
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


def _num(v: float) -> str:
    """A float to 4 significant digits, more where those would show a fraction as a whole number
    (0.99998, not 1), none after the point from 10,000 up (12679, not 1.268e+04)."""
    if v != v or v in (float("inf"), float("-inf")):
        return str(v)
    if abs(v) >= 1e4:
        return f"{v:.0f}"
    for digits in (4, 5, 6):
        text = f"{v:.{digits}g}"
        if float(text) != round(float(text)) or v == round(v):
            break
    return text


def cell(v) -> str:
    """A table cell: floats by :func:`_num`, ``|`` escaped; a dict as ``k=v`` pairs (nested ones as
    ``k: (...)``), a list of scalars joined."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return _num(v)
    if isinstance(v, dict):  # a small settings dict (e.g. a row's overrides)
        return ", ".join(f"{k}: ({cell(x)})" if isinstance(x, dict) else f"{k}={cell(x) if x is not None else 'none'}"
                         for k, x in v.items())
    if isinstance(v, list):
        return ", ".join(cell(x) if _scalar(x) else json.dumps(x, sort_keys=True) for x in v)
    return str(v).replace("|", "\\|").replace("\n", " ")


def _scalar(v) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


def _is_cell(v) -> bool:
    if isinstance(v, dict):
        return all(isinstance(x, (bool, int, float, str)) for x in v.values()) and len(cell(v)) <= MAX_CELL
    if isinstance(v, list):
        return all(isinstance(x, (bool, int, float)) for x in v) and len(cell(v)) <= MAX_CELL
    return v is None or isinstance(v, (bool, int, float)) or (isinstance(v, str) and len(v) <= MAX_CELL)


def _text(v) -> bool:
    """A string (or joined list) to show as a paragraph: longer than :data:`MAX_CELL`, with spaces
    (a long word, such as a hash, stays a table cell); a list of strings, some of them such texts,
    is shown as a list."""
    if isinstance(v, list):
        return bool(v) and all(isinstance(x, str) for x in v) and any(_text(x) for x in v)
    return isinstance(v, str) and len(v) > MAX_CELL and any(c.isspace() for c in v.strip())


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


def _identity(rows: list[dict]) -> list[str]:
    """What names a row's configuration in a file: its key fields, then the :data:`SWEEP_FIELDS`
    some row has (none when the file has no key field: a sweep)."""
    keys = _key_fields(rows)
    return keys + [k for k in SWEEP_FIELDS if any(k in r for r in rows)] if keys else []


def _machine_of(row: dict, meta: dict) -> str:
    """The row's machine (the file's where the row has none), as :func:`machine_text` writes it."""
    return machine_text(row.get("machine", meta.get("machine")))


def _script_of(stem: str, rows: list[dict], meta: dict) -> str | None:
    """The bench script that wrote a file: the one its recorded commands run (the file's ``command`` or
    ``commands``, a row's ``command``, else its ``script``: rows whose command is the ``preqrag run`` a
    bench script made name the script there), else ``bench/<stem>.py`` when it exists, else None."""
    commands = [c for c in [meta.get("command"), *(meta.get("commands") or []), *[r.get("command") for r in rows],
                            *[r.get("script") for r in rows]] if isinstance(c, str) and c]
    return next((s for s in map(_script, commands) if s), None) or (
        f"bench/{stem}.py" if (ROOT / "bench" / f"{stem}.py").is_file() else None)


def _comparable(field: str, value):
    """A key field's value as rows are matched on it: a ``config`` dict (a pipeline configuration) with
    its tables under their current names (``[reranker]`` is ``[cross_encoder]``:
    :func:`preqrag.core.config.renamed_tables`), so that a row written before a rename and one after it
    of the same settings are one configuration. The page still shows each row as it was written."""
    if field != "config" or not isinstance(value, dict):
        return value
    try:
        return renamed_tables(value, warn=False)
    except ValueError:  # both names in one row: compared as written
        return value


def current_rows(rows: list[dict], meta: dict) -> list[tuple[int, dict]]:
    """(1-based position in the JSON, row) of the latest row per configuration and machine, in
    the order the latest rows were written; rows that differ in one of :data:`SWEEP_FIELDS` (the
    questions, passages, workers measured) are different measurements. A file whose rows have none
    of :data:`KEY_FIELDS` is a sweep: every row is current. A row with ``superseded_by`` (why, e.g. "row 38: the same
    preset on 200 questions") is history only: it stays in the JSON, not in the current table."""
    keys = _identity(rows)
    if not keys:
        return [(i, r) for i, r in enumerate(rows, 1) if not r.get("superseded_by")]
    latest: dict[tuple, tuple[int, dict]] = {}
    for i, r in enumerate(rows, 1):
        if r.get("superseded_by"):  # history: a later row of the same setting measured more
            continue
        ident = tuple(json.dumps(_comparable(k, r.get(k)), sort_keys=True) for k in keys) + (_machine_of(r, meta),)
        latest.pop(ident, None)
        latest[ident] = (i, r)
    return list(latest.values())


def columns(rows: list[dict]) -> list[str]:
    """Key fields first, then every field that some row has as a scalar, a text, a list of scalars
    or a dict (a list of records is a table of its own), in first-seen order."""
    cols = _key_fields(rows)
    for r in rows:
        for k, v in r.items():
            if k not in cols and k not in NOT_COLUMNS and v not in (None, []) and (
                    _scalar(v) or _settings(v) or (isinstance(v, list) and all(_scalar(x) for x in v))):
                cols.append(k)
    return cols


def _record_list(v) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def _row_records(items: list[tuple[str, dict]], lead: str, title: str = "") -> list[str]:
    """Markdown of the records' lists of records (e.g. each current row's search-setting sweep, each
    corpus's rows): one table per field, its entries after their record's ``lead`` value (``items``:
    (that value, record)); more than :data:`MAX_ROW_RECORDS` entries are counted, not shown."""
    lines: list[str] = []
    fields = list(dict.fromkeys(k for _, r in items for k, v in r.items() if k not in NOT_COLUMNS and _record_list(v)))
    for f in fields:
        entries = [(i, x) for i, r in items if _record_list(r.get(f)) for x in r[f]]
        head = f"## {title}{f} (per {lead if lead != '#' else 'row'})"
        if len(entries) > MAX_ROW_RECORDS:
            lines += [head, "", f"{len(entries)} entries in all: see the JSON.", ""]
            continue
        recs = [x for _, x in entries]
        lines += [head, "", *_table(recs, columns(recs), lead, [i for i, _ in entries],
                                    [f"{lead} {i}" if lead != "#" else f"#{i}" for i, _ in entries]), ""]
    return lines


def _settings(v) -> bool:
    """A dict of settings or figures (a row's config, its seconds by stage): shown by
    :func:`_dict_column`."""
    return isinstance(v, dict)


def _leaves(d: dict, prefix: str = "") -> dict[str, object]:
    """``a.b`` -> value of a settings dict's scalars."""
    out: dict[str, object] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_leaves(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _nest(leaves: dict[str, object]) -> dict:
    """The inverse of :func:`_leaves` (for the part of a dict that is shown)."""
    out: dict = {}
    for path, v in leaves.items():
        *parents, last = path.split(".")
        d = out
        for p in parents:
            d = d.setdefault(p, {})
        d[last] = v
    return out


def _same(a, b) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _dict_column(rows: list[dict], col: str) -> tuple[list[str] | None, str]:
    """(cells, note) of a column holding dicts too long for a cell: each cell shows the entries
    that differ between the rows; the ones every row has alike are named in the note. Where the
    differences are longer than two cells, a key column shows what tells its row apart from the
    rows equal in the other key fields (a different preset's settings are the name's part); any
    other column whose differences are longer than a cell is left out of the table (cells None;
    the note says so)."""
    leaves = [_leaves(r[col]) if isinstance(r.get(col), dict) else None for r in rows]
    dicts = [x for x in leaves if x is not None]
    paths = list(dict.fromkeys(p for x in dicts for p in x))
    same = [p for p in paths if all(p in x for x in dicts) and all(_same(x[p], dicts[0][p]) for x in dicts)]
    differ = [p for p in paths if p not in same]

    def cells_of(shown: list[str]) -> list[str]:
        return [cell(_nest({p: x[p] for p in shown if p in x})) if x is not None else cell(r.get(col))
                for x, r in zip(leaves, rows)]

    cells = cells_of(differ)
    note = ""
    if col not in KEY_FIELDS and any(len(c) > MAX_CELL for c in cells):
        return None, f"`{col}` (a dict per row, too long for the table) is in the JSON."
    if col in KEY_FIELDS and any(len(c) > 2 * MAX_CELL for c in cells):
        others = [k for k in _identity(rows) if k != col]
        groups: dict[str, list[dict]] = {}
        for x, r in zip(leaves, rows):
            if x is not None:
                groups.setdefault(json.dumps([r.get(k) for k in others], sort_keys=True), []).append(x)
        shown = [p for p in differ if any(len({json.dumps(x.get(p), sort_keys=True) for x in g}) > 1
                                          for g in groups.values())]
        cells = cells_of(shown)
        note = (f"`{col}`: a cell shows what tells its row apart from the rows equal in "
                f"{', '.join(f'`{k}`' for k in others)}" + (f" ({', '.join(shown)})" if shown else " (nothing)")
                + f"; {len(differ)} settings differ between the rows and {len(same)} are alike (see the JSON).")
    elif same:
        alike = cell(_nest({p: dicts[0][p] for p in same}))
        note = (f"`{col}`: a cell shows what differs between the rows; the same in every row that has one: {alike}."
                if len(alike) <= 4 * MAX_CELL else
                f"`{col}`: a cell shows what differs between the rows; {len(same)} entries are the same in every "
                "row (see the JSON).")
    return cells, note


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
            if v and all(isinstance(x, str) for x in v) and any(_text(x) for x in v):
                out.append((name, v))  # notes: a list item each
            elif all(_scalar(x) for x in v) and len(v) <= MAX_LIST:
                out.append((name, cell(v)))
            elif not all(isinstance(x, dict) for x in v):
                out.append((name, f"{len(v)} entries (see the JSON)"))
        else:
            out.append((name, v))
    return out


def _commands(commands, lead: str) -> list[str]:
    """Lines for a file-level ``commands`` field: a list of commands, or a dict of them by step."""
    if isinstance(commands, dict):
        return [f"{lead}{k}: " + "; ".join(f"`{c}`" for c in (v if isinstance(v, list) else [v]))
                for k, v in commands.items()]
    return [f"{lead}`{c}`" for c in commands or []]


def _common_start(commands: list[str]) -> str:
    """The words three or more distinct commands all begin with (40 characters at least), else
    empty: the Commands list then shows what differs."""
    if len(commands) < 3:
        return ""
    words = [c.split(" ") for c in commands]
    n = 0
    while all(len(w) > n + 1 and w[n] == words[0][n] for w in words):
        n += 1
    while n and words[0][n - 1].startswith("-"):  # an option stays with its value
        n -= 1
    head = " ".join(words[0][:n])
    return head if len(head) >= 40 else ""


def _rows(ix: list[int]) -> str:
    """``row 3`` / ``rows 1-4, 7``: runs of consecutive positions as ranges."""
    runs: list[list[int]] = []
    for i in ix:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ("row " if len(ix) == 1 else "rows ") + ", ".join(
        str(r[0]) if len(r) == 1 else f"{r[0]}, {r[1]}" if len(r) == 2 else f"{r[0]}-{r[-1]}" for r in runs)


def _table(rows: list[dict], cols: list[str], first: str | None = None, firsts: list | None = None,
           ids: list[str] | None = None) -> list[str]:
    """:func:`harness.md_table` of ``rows`` with every value shown by :func:`cell`, ``first`` a
    leading column holding ``firsts``. Nothing that tells rows apart is cut: a key field is shown
    whole; a column of settings dicts by :func:`_dict_column`; any other value that is no table
    cell (a long text) is listed below the table, after its row's ``ids`` entry (default
    ``row N``)."""
    ids = ids or [f"row {j}" for j in range(1, len(rows) + 1)]
    lead = [" first"] if first else []  # its own key: a record may have a field of the same name
    shown = [{" first": cell(firsts[j])} if first else {} for j in range(len(rows))]
    notes: list[str] = []
    below: dict[tuple[str, str], list[str]] = {}  # (column, text) -> the rows holding it
    for c in list(cols):
        values = [r.get(c) for r in rows]
        if sum(isinstance(v, dict) for v in values) >= 2 and any(isinstance(v, dict) and not _is_cell(v) for v in values) \
                and all(v is None or _settings(v) or _is_cell(v) for v in values):
            cells, note = _dict_column(rows, c)
            notes += [note] if note else []
            if cells is None:
                cols = [x for x in cols if x != c]
                continue
        else:
            cells = []
            for j, v in enumerate(values):
                if _is_cell(v) or c in KEY_FIELDS:
                    cells.append(cell(v))
                else:
                    cells.append("(below)")
                    text = (cell(v) if _scalar(v) or _settings(v) or all(_scalar(x) for x in v)
                            else f"{len(v)} entries (see the JSON)")
                    below.setdefault((c, text), []).append(ids[j])
        if not any(cells):  # nothing to show (a key column's note says why)
            cols = [x for x in cols if x != c]
            continue
        for j, text in enumerate(cells):
            shown[j][c] = text
    if first is None and not cols:
        return []
    out = md_table(shown, lead + cols, head=([first] if first else []) + cols)
    for n in notes:
        out += ["", n]
    return out + ([""] + [f"- {', '.join(who)}, `{c}`: {text}" for (c, text), who in below.items()] if below else [])


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
                  "", *_table([r for _, r in cur], cols, "#", [i for i, _ in cur], [f"#{i}" for i, _ in cur]), "",
                  *_row_records([(str(i), r) for i, r in cur], "#")]
        by_cmd: dict[str, list[int]] = {}
        by_machine: dict[str, list[int]] = {}
        for i, r in cur:
            c = r.get("command") or meta.get("command")
            by_cmd.setdefault(c or "not recorded", []).append(i)
            by_machine.setdefault(_machine_of(r, meta), []).append(i)
        lines += ["## Commands", ""]
        head = _common_start([c for c in by_cmd if c != "not recorded"])
        if head:
            lines += [f"Every command below begins `{head}`; each line gives the rest.", ""]
        lines += [f"- {_rows(ix)}: `{'… ' if head else ''}{c[len(head):].strip()}`" if c != "not recorded"
                  else f"- {_rows(ix)}: not recorded" + (" (the file's commands are below)" if meta.get("commands") else "")
                  for c, ix in by_cmd.items()]
        lines += _commands(meta.get("commands"), "- the file's commands: ")
        lines += ["", "## Machines", ""]
        lines += [f"- {_rows(ix)}: {m}" for m, ix in by_machine.items()]
        dates = sorted({str(r.get("date") or meta.get("date") or "")[:10] for _, r in cur} - {""})
        if dates:
            lines += ["", f"Dates of these rows: {', '.join(dates)}."]
        lines.append("")
    else:
        lines += [f"Command: `{meta['command']}`" if meta.get("command") else
                  "Commands:" if meta.get("commands") else "Command: not recorded", "",
                  *_commands(meta.get("commands"), "- "), *([""] if meta.get("commands") else []),
                  f"Machine: {machine_text(meta.get('machine'))}" + (
                      f"; date {str(meta['date'])[:10]}." if meta.get("date") else "."), ""]
    extra = {k: v for k, v in meta.items() if k not in ("command", "machine", "date")}
    flat = _flat(extra)
    fields = [(k, v) for k, v in flat if not _text(v)]
    if fields:
        lines += ["## Fields" if rows else "## Figures", "",
                  *md_table([{"field": k, "value": cell(v)} for k, v in fields], ["field", "value"]), ""]
    for k, v in flat:  # the notes: a paragraph (or a list) each, under the field's name
        if _text(v):
            lines += [f"## {k}", "", *([" ".join(v.split())] if isinstance(v, str) else
                                       [f"- {' '.join(x.split())}" for x in v]), ""]

    def sub_tables(name: str, v) -> None:
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            lines.extend([f"## {name}", "", *_table(v, columns(v)), ""])
            keys = _key_fields(v)  # the entries' own lists of records, each entry named by its first key field
            lines.extend(_row_records([(cell(x.get(keys[0])) if keys else str(j), x) for j, x in enumerate(v, 1)],
                                      keys[0] if keys else "row", f"{name}."))
        elif _records(v) and all(_records(x) for x in v.values()):  # records of records: a table each
            for kk, vv in v.items():
                sub_tables(f"{name}.{kk}", vv)
        elif _records(v):
            recs = list(v.values())
            lines.extend([f"## {name}", "", *_table(recs, columns(recs), "name", list(v), [f"`{k}`" for k in v]), ""])
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
             "ladder), [sizing and hardware](sizing.md), [indexing](indexing.md), [throughput](throughput.md), "
             "[models](models.md), [testing](testing.md). An example of `preqrag eval`'s report (the smoke set, "
             "its run and date in its first lines; [evaluation](evaluation.md) explains it) is in "
             "`docs/bench/smoke_eval/`.", ""]
    table = []
    for stem, data in files.items():
        rows, meta = split_rows(data)
        script = _script_of(stem, rows, meta)
        cur = current_rows(rows, meta) if rows else []
        machines = sorted({_machine_of(r, meta) for _, r in cur} if rows else {machine_text(meta.get("machine"))})
        table.append({"benchmark": f"[{stem}](results/{stem}.md)", "measured by": f"`{script}`" if script else "–",
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


run = main
"""The entry of ``python -m bench results`` (bench/__main__.py): ``run(argv)``, the exit status."""


if __name__ == "__main__":
    sys.exit(main())
