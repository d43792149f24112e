"""Only what pyproject.toml cannot say: the folder-to-module map, and the data files the wheel carries.

The repository keeps its folders by role (app/ = the shared core, graphs/ = one home per method,
prompts/ = every prompt as a file); they install as one import package, `recollect`:

    app/            -> recollect            (recollect.llm, recollect.memory, recollect.eval, ...)
    graphs/         -> recollect.graphs     (recollect.graphs.memr3.graph, ...)
    prompts/        -> recollect/prompt_files/  (data, read through importlib.resources)
    examples/sample_dialogue.json -> recollect/sample_dialogue.json (`recollect demo` from a wheel)
    langgraph.json  -> recollect/langgraph.json (the server's graph registry, `recollect serve` from a wheel)

Nothing installs as a top-level `app`, `graphs` or `prompts`, so a host application's own `app/`
package and ours never shadow each other.
"""

import shutil
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
FOLDERS = {"recollect": "app", "recollect.graphs": "graphs"}


def packages() -> list[str]:
    out = []
    for package, folder in FOLDERS.items():
        out.append(package)
        out += [f"{package}.{sub}" for sub in find_packages(folder)]
    return out


class BuildWithData(build_py):
    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "recollect"
        shutil.copytree(HERE / "prompts", target / "prompt_files", dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("*.pyc", "__pycache__"))
        shutil.copy2(HERE / "examples" / "sample_dialogue.json", target / "sample_dialogue.json")
        shutil.copy2(HERE / "langgraph.json", target / "langgraph.json")


setup(packages=packages(), package_dir=FOLDERS, cmdclass={"build_py": BuildWithData})
