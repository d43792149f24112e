"""With the prefix-layout settings off, each graph sends exactly the requests it sent before its layout.

`requests_before_issue34.json` holds the digests of every request `benchmarks/prefix_reuse.py` recorded for
MemR3 and MRAgent on the commit before issue 34's change (eedec1b), `requests_before_layouts.json` those of
HyMem and MGRetrieval on the commit before their layouts (3d4848d), for the tuned and the paper profile: the
sample dialogue, a scripted policy, each request's messages and bound schema, tools and caps. MGRetrieval's
keyword-selection request is named instead of digested (`prefix_reuse.UNSTABLE`: its candidate order comes
from the vector index's tie-breaking); the layout does not touch it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.prefix_reuse import OFF, digests, record

DATA = Path(__file__).parent / "data"
BEFORE = {**json.loads((DATA / "requests_before_issue34.json").read_text()),
          **json.loads((DATA / "requests_before_layouts.json").read_text())}


@pytest.mark.parametrize("graph", ["memr3", "mragent", "hymem", "mgretrieval"])
@pytest.mark.parametrize("profile", ["tuned", "paper"])
def test_the_off_path_sends_the_old_requests_byte_for_byte(tmp_path: Path, graph: str, profile: str) -> None:
    settings = {"profile": profile, **(OFF[graph] if profile == "tuned" else {})}
    got = digests(record(graph, settings, str(tmp_path)))
    assert got == BEFORE[f"{graph}/{profile}"]


@pytest.mark.parametrize("graph", ["memr3", "mragent", "hymem"])
def test_the_layout_on_changes_the_requests(tmp_path: Path, graph: str) -> None:
    on = {"memr3": {"memr3_prefix_layout": True, "memr3_skip_forced_router": True, "memr3_require_tracker": True},
          "mragent": {}, "hymem": {"hymem_prefix_layout": True}}[graph]
    got = digests(record(graph, on, str(tmp_path)))
    assert got != BEFORE[f"{graph}/tuned"]  # the digests above would not notice a layout that did nothing
