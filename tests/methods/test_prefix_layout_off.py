"""With the issue-34 settings off, MemR3 and MRAgent send exactly the requests they sent before the change.

`requests_before_issue34.json` holds the digests of every request `benchmarks/prefix_reuse.py` recorded on
the commit before the change (eedec1b), for the tuned and the paper profile: the sample dialogue, a scripted
policy, each request's messages and bound schema, tools and caps.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.prefix_reuse import OFF, digests, record

BEFORE = json.loads((Path(__file__).parent / "data" / "requests_before_issue34.json").read_text())


@pytest.mark.parametrize("graph", ["memr3", "mragent"])
@pytest.mark.parametrize("profile", ["tuned", "paper"])
def test_the_off_path_sends_the_old_requests_byte_for_byte(tmp_path: Path, graph: str, profile: str) -> None:
    settings = {"profile": profile, **(OFF[graph] if profile == "tuned" else {})}
    got = digests(record(graph, settings, str(tmp_path)))
    assert got == BEFORE[f"{graph}/{profile}"]


@pytest.mark.parametrize("graph", ["memr3", "mragent"])
def test_the_layout_on_changes_the_requests(tmp_path: Path, graph: str) -> None:
    got = digests(record(graph, {}, str(tmp_path)))
    assert got != BEFORE[f"{graph}/tuned"]  # the digests above would not notice a layout that did nothing
