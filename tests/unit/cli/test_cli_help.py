"""Every command's ``--help`` shows its help texts whole: typer renders help as Rich markup, which
ate bracketed words ("with [n] markers" showed as "with  markers", "[index] backend" and "[llm]" as
nothing). :class:`preqrag.cli.common.PlainHelpGroup` escapes them; these tests render the help of
every command and sub-command and compare it with the raw help strings of the source."""

from __future__ import annotations

import inspect
import re

import pytest
import typer
from typer.testing import CliRunner

from preqrag.cli import common as cli_common
from preqrag.cli.app import app

WIDE = {"COLUMNS": "200", "TERMINAL_WIDTH": "200"}
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_BOX = re.compile(r"[│╭╮╰╯─┃━┏┓┗┛]")
_BRACKETED = re.compile(r"\[[a-z#/@][^\[\]]*\]")  # what Rich would take for a markup tag


def _walk(command, path=()):
    yield path, command
    for name, sub in sorted((getattr(command, "commands", None) or {}).items()):
        yield from _walk(sub, (*path, name))


def _visible(text: str | None) -> str:
    """The part of a help string typer prints (before a lone \\f, without \\b)."""
    return inspect.cleandoc(text or "").partition("\f")[0].replace("\b", "")


def _raw_tree(monkeypatch):
    """The command tree with its help strings as the source writes them (nothing escaped)."""
    with monkeypatch.context() as m:
        m.setattr(cli_common, "escape_help_markup", lambda command: None)
        return typer.main.get_command(app)


def _texts(command):
    """(what, help text) of a command: its own help, each shown parameter's, and, for a group,
    the first paragraph of each sub-command's (the commands panel)."""
    yield "help", _visible(command.help)
    for p in command.params:
        if not getattr(p, "hidden", False):
            yield f"option {p.name}", _visible(getattr(p, "help", None))
    for name, sub in (getattr(command, "commands", None) or {}).items():
        if not sub.hidden:
            yield f"commands panel: {name}", _visible(sub.short_help or sub.help).split("\n\n")[0]


def _render(path) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], env=WIDE, terminal_width=200)
    assert result.exit_code == 0, (path, result.output)
    return _ANSI.sub("", result.output)


def _contains_words(haystack: list[str], needle: list[str]) -> bool:
    n = len(needle)
    return any(haystack[i:i + n] == needle for i in range(len(haystack) - n + 1))


def test_every_help_text_shows_whole(monkeypatch):
    """For every command and sub-command: each bracketed word of each help string shows, no doubled
    space stands where one was, and the help text's words show in order (wrap-independent)."""
    raw = _raw_tree(monkeypatch)
    commands = list(_walk(raw))
    assert len(commands) > 5
    bracketed_seen = set()
    failures = []
    for path, command in commands:
        out = _render(path)
        words = _BOX.sub(" ", out).split()
        for what, text in _texts(command):
            where = f"{' '.join(['preqrag', *path])} --help, {what}"
            for m in _BRACKETED.finditer(text):
                bracketed_seen.add(m.group())
                if m.group() not in out:
                    failures.append(f"{where}: {m.group()} missing")
                before = text[:m.start()].split()[-1:]
                after = text[m.end():].split()[:1]
                if before and after and f"{before[0]}  {after[0]}" in out:
                    failures.append(f"{where}: doubled space where {m.group()} stood")
            if text.split() and not _contains_words(words, text.split()):
                failures.append(f"{where}: {text!r} not shown whole")
    assert not failures, "\n".join(failures)
    # the test sees the texts the bug report names (else it checks nothing)
    assert {"[n]", "[index]", "[llm]"} <= bracketed_seen, bracketed_seen


def test_ask_help_shows_n_markers_and_index_table():
    out = _render(["ask"])
    assert "with [n] markers" in out
    assert "not needed with [index] backend" in out
    assert "\\[" not in out  # the escape itself never shows


def test_escape_is_idempotent_and_only_for_rich_markup():
    root = typer.main.get_command(app)
    ask = root.commands["ask"]
    before = ask.help
    cli_common.escape_help_markup(root)  # a second pass escapes nothing twice
    assert ask.help == before and "\\[n]" in ask.help

    plain = typer.Typer(add_completion=False, rich_markup_mode=None, cls=cli_common.PlainHelpGroup)

    @plain.command()
    def one(x: int = typer.Option(1, help="the [x] table")):
        """Uses [n] markers."""

    @plain.command()
    def two():
        """Two."""

    group = typer.main.get_command(plain)
    assert group.commands["one"].help == "Uses [n] markers."  # not parsed as markup: left alone
    out = CliRunner().invoke(plain, ["one", "--help"], env=WIDE, terminal_width=200).output
    assert "Uses [n] markers." in out and "the [x] table" in out and "\\[" not in out


@pytest.mark.parametrize("path", [[], ["index"], ["models"]])
def test_group_help_renders(path):
    """Groups render (their commands panel parses each sub-command's first paragraph)."""
    if path and path[0] not in typer.main.get_command(app).commands:
        pytest.skip(f"no {path[0]} group")
    assert "Usage" in _render(path)
