"""The llama.cpp server's wrapper exits when its owner is SIGKILLed (no cleanup code ran)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purpose; /proc tells them apart on Linux
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and POSIX signals")
def test_guarded_child_exits_when_its_owner_is_killed(tmp_path: Path) -> None:
    (tmp_path / "sleeper.py").write_text("import time\nwhile True:\n    time.sleep(0.2)\n")
    owner_code = textwrap.dedent(f"""
        import os, subprocess, sys, time
        env = dict(os.environ, PYTHONPATH={str(tmp_path)!r} + os.pathsep + {str(ROOT)!r})
        child = subprocess.Popen([sys.executable, "-m", "recollect.llm.orphan_guard", str(os.getpid()), "sleeper"],
                                 env=env, start_new_session=True)
        print(child.pid, flush=True)
        time.sleep(60)
    """)
    owner = subprocess.Popen([sys.executable, "-c", owner_code], stdout=subprocess.PIPE, text=True)
    child = int(owner.stdout.readline())
    try:
        time.sleep(1.5)
        assert _alive(child), "the guarded module should run while its owner lives"
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=5)
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(child), "the guarded child outlived its SIGKILLed owner"
    finally:
        for pid in (owner.pid, child):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_guard_rejects_a_bad_command_line() -> None:
    from recollect.llm.orphan_guard import main

    with pytest.raises(SystemExit, match="usage"):
        main(["not-a-pid", "llama_cpp.server"])
