"""What the speed benchmarks share: running a step in its own Python process with its output logged, and
the machine a report names."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_python(args: list[str], log: Path, env: dict[str, str] | None = None) -> None:
    """`python <args>` in the checkout, unbuffered, its output appended to `log` after the command line;
    a non-zero exit stops the benchmark with one line naming the log."""
    env = dict(env if env is not None else os.environ, PYTHONUNBUFFERED="1")
    with open(log, "a", encoding="utf-8") as out:
        out.write(f"\n$ python {' '.join(args)}\n")
        out.flush()
        proc = subprocess.run([sys.executable, *args], env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise SystemExit(f"error: python {' '.join(args[:4])} … failed with exit {proc.returncode}; see {log}")


def machine() -> dict[str, Any]:
    """The CPU's model name (from /proc/cpuinfo where there is one) and the core count."""
    cpu = platform.processor()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                    if line.startswith("model name")), cpu)
    return {"cpu": cpu, "cores": os.cpu_count()}
