"""The distribution's metadata: dependency ranges, one import package. (tests/service/test_wheel.py
installs the built wheel and runs it.)"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_dependencies_are_ranges_without_unused_packages() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {d.split(">")[0].split("<")[0].split("=")[0].split("[")[0].strip(): d for d in project["dependencies"]}
    assert "langchain-chroma" not in core and "nltk" not in core  # unused / eval only
    assert "nltk" in " ".join(project["optional-dependencies"]["eval"])
    assert not any("==" in d or "<=" in d for d in core.values()), core
    assert core["langchain-core"].replace(" ", "").endswith("<2")


def test_console_script_is_recollect_cli() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"recollect": "recollect.cli:main"}
