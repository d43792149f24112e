"""The LangGraph server's configuration, generated from the installed package.

`recollect serve` must work from a wheel in any directory, where no langgraph.json sits beside the
code. The registry (`langgraph.json`, packaged into the wheel) names every graph by module path
(`recollect.graphs.memr3.graph:graph`), so a copy of it written into the server's own working directory
loads the installed graphs wherever that directory is. The server's working directory (`langgraph
dev` keeps its run queue there) lives under the data directory, never in the checkout or site-packages.
The generated config always installs recollect's auth handlers (recollect.service.auth), whatever the
registry says: they keep server configuration out of clients' hands even when per-user auth is off; and
recollect's HTTP layer (recollect.service.http), which with auth on asks every route but `/ok` for a key and
serves recollect's own MCP endpoint (recollect.service.mcp) instead of LangGraph's, behind those handlers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from recollect.packaged import graph_registry_path

AUTH_PATH = "recollect.service.auth:auth"
HTTP_APP = "recollect.service.http:app"


def registry() -> dict[str, Any]:
    return json.loads(graph_registry_path().read_text(encoding="utf-8"))


def graph_specs() -> dict[str, dict[str, str]]:
    """Each served graph's `path` (module:attribute) and `description` (what it is good for, what it costs, what it
    takes: the server gives it to the graph's assistant, and the MCP endpoint to its tool)."""
    graphs = registry()["graphs"]
    return {name: dict(spec) if isinstance(spec, dict) else {"path": spec, "description": ""}
            for name, spec in graphs.items()}


def graph_names() -> list[str]:
    return list(registry()["graphs"])


def write_server_config(server_dir: Path, *, auth_on: bool = False) -> Path:
    """Write the server's langgraph.json into `server_dir` (created) and return its path.

    `auth_on` (an auth file is set) also turns off LangGraph's Studio bypass, which would otherwise let any
    request with an `x-auth-scheme: langsmith` header past the API-key check.
    """
    config = registry()
    # Module paths only: a file path would import a graph module a second time under another name.
    bad = {name: spec["path"] for name, spec in graph_specs().items()
           if "/" in spec["path"] or spec["path"].endswith(".py")}
    if bad:
        raise ValueError(f"langgraph.json must name graphs by module path (recollect.graphs.x:graph), not {bad}")
    config["dependencies"] = ["."]
    config["auth"] = {"path": AUTH_PATH, "disable_studio_auth": auth_on}
    # the key check before every route but /ok, and recollect's MCP endpoint in place of LangGraph's
    # (recollect.service.mcp), behind the same auth handlers
    config["http"] = {**(config.get("http") or {}), "app": HTTP_APP, "enable_custom_route_auth": True,
                      "disable_mcp": True}
    server_dir.mkdir(parents=True, exist_ok=True)
    path = server_dir / "langgraph.json"
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return path
