"""What every probe shares: the tally of outcomes, made-up dialogues, and a data directory's fingerprint.

A probe is one attempt to misuse recollect (bad input, a client reaching past its rights, a wrong option)
with the behaviour it must show. "Clean" means exactly that behaviour: a refusal as one `error:` line and the
documented status, nothing stored changed, or a success where success is right. Anything else (a traceback, a
silent acceptance, a wrong status, a change left behind) is "failed", with what was seen.
"""

from __future__ import annotations

import hashlib
import json
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# A made-up conversation (no dataset text): two friends over three sessions.
SPEAKERS = ("Ines", "Tomas")
SESSIONS = [
    ("2024-03-02T10:15", [("Ines", "I adopted a grey cat called Pesto on Saturday."),
                          ("Tomas", "Pesto is a great name. Does he like the balcony?"),
                          ("Ines", "He sleeps there all afternoon.")]),
    ("2024-03-20T18:40", [("Tomas", "I started a new job at the harbour museum this week."),
                          ("Ines", "The one with the old lighthouse lens?"),
                          ("Tomas", "Yes, I restore the ship models there.")]),
    ("2024-04-11T09:05", [("Ines", "Pesto knocked my clay teapot off the shelf."),
                          ("Tomas", "Did you glue it back together?"),
                          ("Ines", "I made a new one at the Thursday pottery class.")]),
]


def dialogue(conversation_id: str = "ines-tomas") -> dict[str, Any]:
    """The made-up conversation in the simple format."""
    return {"id": conversation_id, "speakers": list(SPEAKERS), "sessions": [
        {"date_time": when, "turns": [{"speaker": who, "text": text} for who, text in turns]}
        for when, turns in SESSIONS]}


def locomo_sample(sample_id: str = "made-up-1") -> dict[str, Any]:
    """The same conversation as one LoCoMo-shaped sample."""
    conversation: dict[str, Any] = {"speaker_a": SPEAKERS[0], "speaker_b": SPEAKERS[1]}
    for n, (_, turns) in enumerate(SESSIONS, start=1):
        conversation[f"session_{n}_date_time"] = f"10:15 am on {n} March, 2024"
        conversation[f"session_{n}"] = [{"speaker": who, "dia_id": f"D{n}:{k}", "text": text}
                                        for k, (who, text) in enumerate(turns, start=1)]
    return {"sample_id": sample_id, "conversation": conversation, "qa": []}


def fingerprint(root: Path) -> dict[str, str]:
    """Every file under `root` by content: what a refused command must leave as it was."""
    if not root.exists():
        return {}
    if root.is_file():
        return {root.name: hashlib.sha256(root.read_bytes()).hexdigest()}
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.name.endswith(("-wal", "-shm"))}


def one_error_line(err: str) -> bool:
    return err.startswith("error: ") and err.count("\n") == 1


@dataclass
class Outcome:
    surface: str
    case: str
    clean: bool
    detail: str = ""
    known: str = ""  # a failure already reported and owned elsewhere (not this issue's)


@dataclass
class Tally:
    outcomes: list[Outcome] = field(default_factory=list)

    def check(self, surface: str, case: str, probe: Callable[[], str | None], known: str = "") -> None:
        """Run `probe`: it returns None when recollect behaved as it must, else what it did instead. An
        exception escaping the probe is a failure too (recollect raised where it should have refused)."""
        try:
            problem = probe()
        except Exception as exc:  # the point of a probe: nothing may escape, whatever it is
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            problem = f"raised {type(exc).__name__}: {str(exc)[:200]} ({Path(frame.filename).name}:{frame.lineno})"
        self.outcomes.append(Outcome(surface, case, problem is None, problem or "", known if problem else ""))
        mark = "clean " if problem is None else "FAILED"
        print(f"  {mark} {surface:7s} {case}" + (f": {problem[:300]}" if problem else ""), flush=True)

    def counts(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for o in self.outcomes:
            row = out.setdefault(o.surface, {"tried": 0, "clean": 0, "failed": 0})
            row["tried"] += 1
            row["clean" if o.clean else "failed"] += 1
        return out

    def report(self) -> str:
        lines = ["| surface | tried | clean | failed |", "|---|---|---|---|"]
        total = {"tried": 0, "clean": 0, "failed": 0}
        for surface, row in self.counts().items():
            lines.append(f"| {surface} | {row['tried']} | {row['clean']} | {row['failed']} |")
            total = {k: total[k] + row[k] for k in total}
        lines.append(f"| all | {total['tried']} | {total['clean']} | {total['failed']} |")
        failed = [o for o in self.outcomes if not o.clean]
        if failed:
            lines += ["", "Failed:"]
            lines += [f"- {o.surface} / {o.case}: {o.detail}" + (f" (known: {o.known})" if o.known else "")
                      for o in failed]
        return "\n".join(lines)

    def as_json(self) -> str:
        return json.dumps({"counts": self.counts(), "outcomes": [asdict(o) for o in self.outcomes]}, indent=1)
