"""Files the package carries: found inside an installed wheel, else in the checkout.

A wheel holds copies (setup.py puts them there); a checkout or an editable install reads the
repository's own files, so an edit to a prompt or to langgraph.json takes effect without a reinstall.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]


def packaged_path(name: str, checkout: str) -> Path:
    """`recollect/<name>` inside an installed wheel, else `<checkout root>/<checkout>`."""
    packaged = Path(str(resources.files("recollect") / name))
    if packaged.exists():
        return packaged
    return CHECKOUT / checkout


def sample_dialogue_path() -> Path:
    """The bundled sample dialogue (`recollect demo`, the README's examples)."""
    return packaged_path("sample_dialogue.json", "examples/sample_dialogue.json")


def graph_registry_path() -> Path:
    """The langgraph.json that registers every graph by module path."""
    return packaged_path("langgraph.json", "langgraph.json")
