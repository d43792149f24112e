"""Run a Python module as a child that exits when the process that started it is gone.

    python -m recollect.llm.orphan_guard PARENT_PID MODULE [ARGS...]

The llama.cpp server is started in its own process group so that a terminal's Ctrl-C reaches the
owner first, which then stops the group. But an owner killed with SIGKILL (a CI timeout, an OOM kill,
a tool that kills a job) runs no cleanup, and the server would keep a core busy and 3 GiB resident
forever. This wrapper polls the parent pid and exits when it changes. Polling (rather than Linux's
PR_SET_PDEATHSIG) because the death signal fires when the *thread* that forked exits, and the server
is often started lazily from a worker thread (the eval pool, the LangGraph API's executors).
"""

from __future__ import annotations

import os
import runpy
import sys
import threading
import time

POLL_S = 1.0


def _watch(parent: int) -> None:
    while True:
        if os.getppid() != parent:
            # The owner is gone: nobody can reach this server any more. os._exit skips the server's
            # graceful shutdown, which would wait for an in-flight generation nobody will read.
            os._exit(0)
        time.sleep(POLL_S)


def main(argv: list[str]) -> None:
    if len(argv) < 2 or not argv[0].isdigit():
        raise SystemExit("usage: python -m recollect.llm.orphan_guard PARENT_PID MODULE [ARGS...]")
    parent, module, args = int(argv[0]), argv[1], argv[2:]
    if os.getppid() != parent:  # the owner died before we got here
        raise SystemExit(0)
    threading.Thread(target=_watch, args=(parent,), name="orphan-guard", daemon=True).start()
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
