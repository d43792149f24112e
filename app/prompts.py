"""Prompt templates live as files under `prompts/<method>/<name>.md`; no prompt text is in code.

Templates use `str.format`-style `{placeholders}`; literal braces are written `{{ }}`.
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path

from recollect.packaged import packaged_path


def _prompts_dir() -> Path:
    """`RECOLLECT_PROMPTS_DIR`, else the copy inside an installed wheel, else the checkout's prompts/."""
    if os.environ.get("RECOLLECT_PROMPTS_DIR"):
        return Path(os.environ["RECOLLECT_PROMPTS_DIR"])
    return packaged_path("prompt_files", "prompts")


PROMPTS_DIR = _prompts_dir()


@lru_cache(maxsize=256)
def load_prompt(method: str, name: str) -> str:
    path = PROMPTS_DIR / method / f"{name}.md"
    if not path.is_file():
        raise FileNotFoundError(f"prompt template not found: {path}")
    return path.read_text(encoding="utf-8").strip()


def render_prompt(method: str, name: str, **values: object) -> str:
    return load_prompt(method, name).format(**values)


def prompt_hash(method: str, name: str) -> str:
    """A short hash of a template, part of every LLM-cache key so an edited prompt re-runs."""
    return hashlib.sha256(load_prompt(method, name).encode()).hexdigest()[:16]
