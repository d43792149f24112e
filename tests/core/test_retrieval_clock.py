"""Retrieval seconds per run: every retrieving function adds to the run's clock, nested calls once."""

from __future__ import annotations

import threading
import time
from contextvars import copy_context

from recollect import ask, ingest
from recollect.llm.scripted import scripted
from recollect.memory.clock import retrieval_clock, timed_retrieval


@timed_retrieval
def _inner() -> str:
    time.sleep(0.02)
    return "inner"


@timed_retrieval
def _outer() -> str:
    time.sleep(0.02)
    return _inner()


def test_nested_calls_count_once_and_outside_a_clock_nothing_is_counted() -> None:
    assert _outer() == "inner"  # no clock: just the call
    with retrieval_clock() as clock:
        _outer()
        _inner()
    assert clock.calls == 2
    assert 0.06 <= clock.seconds < 1.0
    with retrieval_clock() as fresh:
        pass
    assert (fresh.calls, fresh.seconds) == (0, 0.0)


def test_worker_threads_with_the_runs_context_add_to_its_clock() -> None:
    with retrieval_clock() as clock:
        workers = [threading.Thread(target=copy_context().run, args=(_inner,)) for _ in range(3)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    assert clock.calls == 3


def test_a_runs_state_says_how_long_it_retrieved(data_dir: str, sample_path) -> None:
    ingest(sample_path, "maya", methods=["memr3"], data_dir=data_dir)
    model = scripted(default={"answer": "Biscuit", "supports": ["D1:3"], "evidence": [], "gaps": [],
                              "decision": "answer", "detailed_answer": "Biscuit"})
    state = ask("What is Maya's dog called?", "maya", "memr3", data_dir=data_dir, chat_model=model)
    assert 0 < state["retrieval_s"] <= state["wall_time_s"]
