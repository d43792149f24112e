"""The LangGraph server's configuration, generated from the installed package.

`recollect serve` must work from a wheel in any directory, where no langgraph.json sits beside the
code. The registry (`langgraph.json`, packaged into the wheel) names every graph by module path
(`recollect.graphs.memr3.graph:graph`), so a copy of it written into the server's own working directory
loads the installed graphs wherever that directory is. The server's working directory (`langgraph
dev` keeps its run queue there) lives under the data directory, never in the checkout or site-packages.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from recollect.packaged import graph_registry_path


def registry() -> dict[str, Any]:
    return json.loads(graph_registry_path().read_text(encoding="utf-8"))


def graph_names() -> list[str]:
    return list(registry()["graphs"])


def write_server_config(server_dir: Path) -> Path:
    """Write the server's langgraph.json into `server_dir` (created) and return its path."""
    config = registry()
    # Module paths only: a file path would import a graph module a second time under another name.
    bad = {name: spec for name, spec in config["graphs"].items() if "/" in spec or spec.endswith(".py")}
    if bad:
        raise ValueError(f"langgraph.json must name graphs by module path (recollect.graphs.x:graph), not {bad}")
    config["dependencies"] = ["."]
    server_dir.mkdir(parents=True, exist_ok=True)
    path = server_dir / "langgraph.json"
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return path
