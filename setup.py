"""Only what pyproject.toml cannot say: copy the top-level prompts/ into the wheel.

Prompts are edited as `prompts/<method>/<name>.md` in the checkout; an installed package finds them
as `app/prompt_files/...` through importlib.resources (see app/prompts.py).
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithPrompts(build_py):
    def run(self) -> None:
        super().run()
        source = Path(__file__).resolve().parent / "prompts"
        target = Path(self.build_lib) / "app" / "prompt_files"
        shutil.copytree(source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.pyc", "__pycache__"))


setup(cmdclass={"build_py": BuildWithPrompts})
