"""Markdown + self-contained HTML report and ``metrics.json`` for one or more evaluated runs.

Input is one dict per run (what :func:`preqrag.cli.commands.evaluation.evaluate_run` builds)::

    {"name": str, "summary": {...counts...},
     "retrieval": evaluate_retrieval(...) | None,
     "classification": evaluate_classification(...) | None,
     "judge": {"model": str, "meaningless": bool, "summary": summarise_judgments(...)} | None}

Runs are put side by side: every table has one column (or one column group) per run, named
by the run. Plots are PNGs (matplotlib, Agg backend): written under ``plots/`` and linked from
the Markdown, embedded as base64 in the HTML so that it is a single file.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..core.io import atomic_write_text
from .judge import METRICS as JUDGE_METRICS
from .retrieval import CATEGORIES, STAGES

BREAKDOWN_METRICS: tuple[tuple[str, str], ...] = (
    ("single", "hit@1"), ("single", "hit@3"), ("single", "mrr@10"),
    ("multi", "recall@3"), ("multi", "recall@10"))
"""(gold subset, metric) shown in the breakdown tables: the paper's headline single-doc
figures (hit@1, MRR@10; hit@3 = gold in the top-3 context) and multi-doc recall at the
context size (3) and at 10 (Table A.2)."""

CATEGORY_PLOT_METRICS: tuple[tuple[str, str], ...] = (("single", "mrr@10"), ("multi", "recall@10"))
"""Metrics plotted by category: the paper's primary single-doc (Table A.1) and multi-doc
(Table A.2, top-10) figures."""

MEANINGLESS_JUDGE_NOTE = (
    "WARNING: the judge is the bundled SmolLM2-135M-Instruct (135M parameters). Its judge "
    "scores are NOT meaningful: a model this small cannot assess equivalence, relevance or "
    "faithfulness. They only show that the judging path works. Use a capable judge "
    "(the paper used GPT-4o mini) through an OpenAI-compatible server for real figures.")


@dataclass
class Table:
    """A report table: ``rows`` are lists of cells (str or number or None)."""

    title: str
    headers: list[str]
    rows: list[list[Any]]
    note: str = ""


@dataclass
class Section:
    title: str
    text: str = ""
    tables: list[Table] = field(default_factory=list)
    plots: list[tuple[str, bytes]] = field(default_factory=list)  # (file name, PNG bytes)
    warning: str = ""


# ---------------------------------------------------------------------------- formatting

def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.3f}"
    return str(v)


def _md_table(t: Table) -> str:
    esc = lambda s: _fmt(s).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = [f"**{t.title}**", ""]
    if t.note:
        lines += [f"_{t.note}_", ""]
    lines.append("| " + " | ".join(esc(h) for h in t.headers) + " |")
    lines.append("|" + "|".join("---" for _ in t.headers) + "|")
    for r in t.rows:
        lines.append("| " + " | ".join(esc(c) for c in r) + " |")
    return "\n".join(lines) + "\n"


def _html_table(t: Table) -> str:
    head = "".join(f"<th>{html.escape(_fmt(h))}</th>" for h in t.headers)
    body = "".join(
        "<tr>" + "".join(
            f"<td class=\"{'num' if isinstance(c, (int, float)) or c is None else 'txt'}\">"
            f"{html.escape(_fmt(c))}</td>" for c in r) + "</tr>"
        for r in t.rows)
    note = f"<p class=\"note\">{html.escape(t.note)}</p>" if t.note else ""
    return (f"<h3>{html.escape(t.title)}</h3>{note}<table><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>")


# ---------------------------------------------------------------------------- helpers

def _get(d: Mapping | None, *keys, default=None):
    for k in keys:
        if not isinstance(d, Mapping) or k not in d:
            return default
        d = d[k]
    return d


def _stages(runs: Sequence[Mapping]) -> list[str]:
    present: list[str] = []
    for r in runs:
        for s in _get(r, "retrieval", "stages", default=[]) or []:
            if s not in present:
                present.append(s)
    return [s for s in STAGES if s in present] + [s for s in present if s not in STAGES]


def _breakdown_stage(runs: Sequence[Mapping], wanted: str | None) -> str | None:
    stages = _stages(runs)
    if wanted and wanted in stages:
        return wanted
    for s in ("final", "reranked", "merged", "context", "sparse", "dense"):
        if s in stages:
            return s
    return stages[0] if stages else None


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return buf.getvalue()


# ---------------------------------------------------------------------------- sections

def _overview(runs: Sequence[Mapping]) -> Section:
    names = [r["name"] for r in runs]
    keys = [("kind", "kind"), ("answers", "answers"), ("traces", "traces"), ("failed", "failed questions"),
            ("evaluated", "questions evaluated (with gold)"), ("single", "  of which single-gold"),
            ("multi", "  of which multi-gold"), ("path", "file")]
    rows = []
    for k, label in keys:
        vals = []
        for r in runs:
            if k in ("evaluated", "single", "multi"):
                vals.append(_get(r, "retrieval", "n", k))
            else:
                vals.append(_get(r, "summary", k))
        rows.append([label] + vals)
    warnings = [f"{r['name']}: {w}" for r in runs for w in _get(r, "summary", "warnings", default=[]) or []]
    text = ("Retrieval is scored at document level against the gold documents; a failed question "
            "counts as a miss at every stage.")
    if warnings:
        text += "\n\nWarnings:\n" + "\n".join(f"- {w}" for w in warnings)
    return Section("Runs", text, [Table("Runs evaluated", ["", *names], rows)])


def _retrieval(runs: Sequence[Mapping], breakdown_stage: str | None) -> list[Section]:
    stages = _stages(runs)
    if not stages:
        return []
    names = [r["name"] for r in runs]
    out: list[Section] = []

    intro = ("Passage rankings are mapped to documents in rank order (first occurrence wins); the "
             "per-sub-query rankings of a stage are combined by round-robin interleaving. "
             "Single-gold questions: hit@k (Tables 2, 3) and MRR@10 (Table A.1). Multi-gold "
             "questions: recall@k = share of gold documents in the top k (Table A.2, multi-doc rows "
             "of Tables 2, 3) and all@k = share of questions with every gold document in the top k. "
             "Metrics computed with ranx.")
    sec = Section("Retrieval by stage", intro)
    head_rows_s, head_rows_m = [], []
    for s in stages:
        head_rows_s.append([s] + [_get(r, "retrieval", "metrics", s, "breakdown", "all", "all", "single", "mrr@10")
                                  for r in runs])
        head_rows_m.append([s] + [_get(r, "retrieval", "metrics", s, "breakdown", "all", "all", "multi", "recall@10")
                                  for r in runs])
    sec.tables.append(Table("Single-gold questions: MRR@10 by stage", ["stage", *names], head_rows_s))
    sec.tables.append(Table("Multi-gold questions: recall@10 by stage", ["stage", *names], head_rows_m))
    for s in stages:
        rows = []
        for subset, label in (("single", "single-gold"), ("multi", "multi-gold")):
            metric_names: list[str] = []
            for r in runs:
                for m in _get(r, "retrieval", f"{subset}_metrics", default=[]) or []:
                    if m not in metric_names:
                        metric_names.append(m)
            rows.append([f"n ({label})"] + [_get(r, "retrieval", "metrics", s, "breakdown", "all", "all", subset, "n")
                                            for r in runs])
            for m in metric_names:
                rows.append([f"{m} ({label})"] + [
                    _get(r, "retrieval", "metrics", s, "breakdown", "all", "all", subset, m) for r in runs])
        missing = [f"{r['name']}: {_get(r, 'retrieval', 'metrics', s, 'n_missing')}" for r in runs
                   if _get(r, "retrieval", "metrics", s, "n_missing")]
        note = ("questions whose trace lacks this stage (scored as misses): " + ", ".join(missing)) if missing else ""
        sec.tables.append(Table(f"Stage `{s}`", ["metric", *names], rows, note))
    sec.plots.append(("hitk_by_stage.png", _plot_hitk(runs, stages)))
    out.append(sec)

    bstage = _breakdown_stage(runs, breakdown_stage)
    if bstage is None:
        return out
    bsec = Section(f"Retrieval breakdown (stage `{bstage}`)",
                   "By gold question type, predicted question type (failed questions: `failed`) and every "
                   "DataMorgana category (PreQRAG Appendix D). hit@k/MRR@10 over single-gold questions, "
                   "recall@k over multi-gold questions of each group; n = single/multi questions.")
    bys = ["gold_type", "pred_type", *CATEGORIES]
    for by in bys:
        values: list[str] = []
        for r in runs:
            for v in (_get(r, "retrieval", "metrics", bstage, "breakdown", by, default={}) or {}):
                if v not in values:
                    values.append(v)
        if not values:
            continue
        headers = [by]
        for n in names:
            headers.append(f"{n}: n")
            headers += [f"{n}: {m}" for _, m in BREAKDOWN_METRICS]
        rows = []
        for v in values:
            row: list[Any] = [v]
            for r in runs:
                block = _get(r, "retrieval", "metrics", bstage, "breakdown", by, v)
                if block is None:
                    row += [None] * (1 + len(BREAKDOWN_METRICS))
                    continue
                row.append(f"{block['single']['n']}/{block['multi']['n']}")
                row += [block[sub].get(m) for sub, m in BREAKDOWN_METRICS]
            rows.append(row)
        bsec.tables.append(Table(f"By {by}", headers, rows))
        if by in CATEGORIES or by in ("gold_type", "pred_type"):
            bsec.plots.append((f"by_{by}.png", _plot_category(runs, bstage, by, values)))
    out.append(bsec)
    return out


def _classification(runs: Sequence[Mapping]) -> Section | None:
    have = [r for r in runs if r.get("classification")]
    if not have:
        return None
    names = [r["name"] for r in runs]
    rows = []
    for key, label in (("n", "questions scored"), ("n_missing", "without prediction"),
                       ("accuracy_single", "accuracy, gold single-doc (Table 1)"),
                       ("accuracy_multi", "accuracy, gold multi-doc (Table 1)"),
                       ("accuracy", "accuracy, overall"), ("balanced_accuracy", "balanced accuracy")):
        rows.append([label] + [_get(r, "classification", key) for r in runs])
    for g in ("single", "multi"):
        for p in ("single", "multi"):
            rows.append([f"gold {g} → predicted {p}"] + [_get(r, "classification", "confusion", g, p) for r in runs])
    sec = Section("Question classification",
                  "Gold: n_gold == 1 → single, n_gold >= 2 → multi. Accuracy per gold class as in "
                  "PreQRAG Table 1 (paper, rule-based: 0.731 single / 0.953 multi on its own data).",
                  [Table("Single/multi classification", ["", *names], rows)])
    values: list[str] = []
    for r in have:
        for v in r["classification"].get("by_answer_type", {}):
            if v not in values:
                values.append(v)
    headers = ["answer_type"]
    for n in names:
        headers += [f"{n}: n", f"{n}: pred single", f"{n}: pred multi", f"{n}: accuracy"]
    trows = []
    for v in values:
        row: list[Any] = [v]
        for r in runs:
            b = _get(r, "classification", "by_answer_type", v)
            row += [None] * 4 if b is None else [b["n"], b["pred_single"], b["pred_multi"], b["accuracy"]]
        trows.append(row)
    sec.tables.append(Table("Confusion by answer_type", headers, trows,
                            "single-doc questions should be predicted single; multi-aspect, comparison and "
                            "three-doc (2 gold docs here) multi."))
    return sec


def _judge(runs: Sequence[Mapping]) -> Section | None:
    have = [r for r in runs if r.get("judge")]
    if not have:
        return None
    names = [r["name"] for r in runs]
    models = sorted({str(_get(r, "judge", "model")) for r in have})
    meaningless = any(_get(r, "judge", "meaningless") for r in have)
    text = (f"Judge model: {', '.join(models)}. PreQRAG metrics (Appendix C.1 prompts): normalised = "
            "sum of scores / maximum possible score (§3.1). LiveRAG metrics (challenge scales): mean "
            "score on the scale. Unparsable replies are excluded and counted, never guessed.")
    rows, counts = [], []
    for m in JUDGE_METRICS:
        spec = JUDGE_METRICS[m]
        if not any(_get(r, "judge", "summary", m) for r in have):
            continue
        stat = "mean" if m.startswith("liverag_") else "normalised"
        for sub in ("all", "single", "multi"):
            rows.append([f"{m} [{spec.lo}..{spec.hi}] {stat} ({sub})"]
                        + [_get(r, "judge", "summary", m, sub, stat) for r in runs])
        counts.append([m] + [
            None if _get(r, "judge", "summary", m) is None else
            f"{_get(r, 'judge', 'summary', m, 'all', 'n_valid')}/{_get(r, 'judge', 'summary', m, 'all', 'n_judged')}"
            f" (unparsable {_get(r, 'judge', 'summary', m, 'all', 'n_unparsable')},"
            f" error {_get(r, 'judge', 'summary', m, 'all', 'n_error')})" for r in runs])
    sec = Section("Answer quality (LLM judge)", text,
                  [Table("Judge scores", ["metric", *names], rows),
                   Table("Judgments: valid/judged", ["metric", *names], counts)],
                  warning=MEANINGLESS_JUDGE_NOTE if meaningless else "")
    sec.plots.append(("judge.png", _plot_judge(runs)))
    return sec


# ---------------------------------------------------------------------------- plots

def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _plot_hitk(runs: Sequence[Mapping], stages: list[str]) -> bytes:
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    styles = ["-", "--", ":", "-."]
    for ax, subset, prefix, title in ((axes[0], "single", "hit", "Single-gold: hit@k"),
                                      (axes[1], "multi", "recall", "Multi-gold: recall@k")):
        for ri, r in enumerate(runs):
            ks = _get(r, "retrieval", "ks", default=[]) or []
            for si, s in enumerate(stages):
                block = _get(r, "retrieval", "metrics", s, "breakdown", "all", "all", subset)
                if not block or not block.get("n"):
                    continue
                ys = [block.get(f"{prefix}@{k}") for k in ks]
                ax.plot(ks, ys, styles[ri % len(styles)], marker="o", color=f"C{si}",
                        label=f"{s} ({r['name']})" if len(runs) > 1 else s)
        ax.set_title(title)
        ax.set_xlabel("k (documents)")
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    return _png(fig)


def _plot_category(runs: Sequence[Mapping], stage: str, by: str, values: list[str]) -> bytes:
    plt = _plt()
    import numpy as np

    fig, axes = plt.subplots(1, len(CATEGORY_PLOT_METRICS), figsize=(11, 3.6))
    x = np.arange(len(values))
    width = 0.8 / max(1, len(runs))
    for ax, (subset, metric) in zip(axes, CATEGORY_PLOT_METRICS):
        for ri, r in enumerate(runs):
            ys = []
            for v in values:
                val = _get(r, "retrieval", "metrics", stage, "breakdown", by, v, subset, metric)
                ys.append(np.nan if val is None else val)
            ax.bar(x + ri * width - 0.4 + width / 2, ys, width, label=r["name"])
        ax.set_xticks(x)
        ax.set_xlim(-0.6, len(values) - 0.4)
        ax.set_xticklabels(values, rotation=20, ha="right", fontsize=8)
        ax.set_ylim(0, 1)
        ax.set_title(f"{subset}-gold {metric} by {by} ({stage})", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7)
    return _png(fig)


def _plot_judge(runs: Sequence[Mapping]) -> bytes:
    plt = _plt()
    import numpy as np

    metrics = [m for m in JUDGE_METRICS if any(_get(r, "judge", "summary", m) for r in runs)]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    x = np.arange(len(metrics))
    width = 0.8 / max(1, len(runs))
    for ri, r in enumerate(runs):
        ys = [_get(r, "judge", "summary", m, "all", "normalised") for m in metrics]
        ax.bar(x + ri * width - 0.4 + width / 2, [np.nan if y is None else y for y in ys], width,
               label=r["name"])
    ax.set_xticks(x)
    ax.set_xticklabels(metrics, rotation=15, ha="right", fontsize=8)
    ax.set_ylim(-1, 1)
    ax.axhline(0, color="black", lw=0.5)
    ax.set_title("Judge scores, normalised (sum / maximum possible)", fontsize=9)
    ax.legend(fontsize=7)
    return _png(fig)


# ---------------------------------------------------------------------------- rendering

_CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 8px}th{background:#f0f0f0}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.warn{background:#fff0f0;border:2px solid #c00;padding:.8em;font-weight:bold}
.note{color:#555;font-style:italic}img{max-width:100%;border:1px solid #eee}"""


def render_markdown(title: str, sections: Sequence[Section], preamble: str = "") -> str:
    """Markdown text of the report (plots linked as ``plots/<name>``)."""
    parts = [f"# {title}", ""]
    if preamble:
        parts += [preamble, ""]
    for s in sections:
        parts += [f"## {s.title}", ""]
        if s.warning:
            parts += [f"> **{s.warning}**", ""]
        if s.text:
            parts += [s.text, ""]
        for t in s.tables:
            parts += [_md_table(t), ""]
        for name, _ in s.plots:
            parts += [f"![{name}](plots/{name})", ""]
    return "\n".join(parts)


def render_html(title: str, sections: Sequence[Section], preamble: str = "") -> str:
    """A self-contained HTML page (plots embedded as base64 PNG)."""
    parts = [f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
             f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>"]
    if preamble:
        parts.append(f"<p>{html.escape(preamble)}</p>")
    for s in sections:
        parts.append(f"<h2>{html.escape(s.title)}</h2>")
        if s.warning:
            parts.append(f"<p class=\"warn\">{html.escape(s.warning)}</p>")
        if s.text:
            for para in s.text.split("\n\n"):
                parts.append(f"<p>{html.escape(para).replace(chr(10), '<br>')}</p>")
        for t in s.tables:
            parts.append(_html_table(t))
        for name, png in s.plots:
            b64 = base64.b64encode(png).decode("ascii")
            parts.append(f"<p><img alt=\"{html.escape(name)}\" src=\"data:image/png;base64,{b64}\"></p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def build_sections(runs: Sequence[Mapping], breakdown_stage: str | None = None) -> list[Section]:
    """All report sections for the evaluated runs (see module doc for the run dict shape)."""
    sections = [_overview(runs)]
    judge = _judge(runs)
    if judge is not None and judge.warning:
        # Say it first, plainly, as well as in the judge section.
        sections[0].warning = judge.warning
    sections += _retrieval(runs, breakdown_stage)
    for s in (_classification(runs), judge):
        if s is not None:
            sections.append(s)
    return sections


def write_report(runs: Sequence[Mapping], out_dir: str | Path, *, title: str = "PreQRAG evaluation",
                 questions_path: str | None = None, breakdown_stage: str | None = None) -> dict[str, Path]:
    """Write ``report.md``, ``report.html``, ``plots/*.png`` and ``metrics.json`` to ``out_dir``.

    Args:
        runs: evaluated runs, in column order (names must be distinct).
        out_dir: created if missing; existing report files are replaced atomically.
        title: report title.
        questions_path: recorded in the report and ``metrics.json``.
        breakdown_stage: stage of the breakdown tables/plots; default ``final`` (else the
            latest stage present).

    Returns:
        ``{"markdown", "html", "metrics"}`` → paths written.

    Raises:
        ValueError: duplicate run names.
    """
    names = [r["name"] for r in runs]
    if len(set(names)) != len(names):
        raise ValueError(f"run names must be distinct: {names}")
    out = Path(out_dir)
    (out / "plots").mkdir(parents=True, exist_ok=True)
    sections = build_sections(runs, breakdown_stage)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    preamble = f"Runs: {', '.join(names)}. Questions: {questions_path or '?'}. Generated {now}."
    for s in sections:
        for name, png in s.plots:
            (out / "plots" / name).write_bytes(png)
    paths = {"markdown": out / "report.md", "html": out / "report.html", "metrics": out / "metrics.json"}
    atomic_write_text(paths["markdown"], render_markdown(title, sections, preamble))
    atomic_write_text(paths["html"], render_html(title, sections, preamble))
    metrics = {"generated": now, "questions": questions_path,
               "runs": {r["name"]: {k: v for k, v in r.items() if k != "name"} for r in runs}}
    atomic_write_text(paths["metrics"], json.dumps(metrics, indent=1, ensure_ascii=False, default=str))
    for p in paths.values():
        p.chmod(0o644)  # atomic_write_text's temp files are private (0600); reports are for reading
    return paths
