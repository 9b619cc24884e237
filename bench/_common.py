"""Helpers shared by the bench/ scripts."""

from __future__ import annotations

import os
import platform


def machine() -> dict:
    """CPU model, core count, RAM (GiB), OS and Python of this machine."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    ram = None
    try:
        ram = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "ram_gib": ram, "os": platform.platform(),
            "python": platform.python_version()}


def describe(m: dict) -> str:
    """One line for Markdown tables."""
    return f"{m['cpu']}, {m['cores']} cores, {m['ram_gib']} GiB RAM, {m['os']}, Python {m['python']}"
