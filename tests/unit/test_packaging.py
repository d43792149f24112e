"""The built wheel installs (non-editable) into a fresh venv and answers from the sample dialogue
with a scripted model: prompts ship inside the wheel and load from the installed package.

Offline and cheap: the wheel is built without isolation, the fresh venv reaches the project venv's
dependencies through a .pth line (not its site dir, so the editable install is not visible), and
pip installs the wheel alone with --no-deps --no-index.
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, sys
from pathlib import Path
import recollect, recollect.prompts
from recollect.graphs.registry import AllMethodsContext
from recollect.dialogue.loaders import load_conversation
from recollect.ingestion import ingest_conversation
from recollect.llm.scripted import scripted
from recollect.memory.embeddings import HashEmbeddings
from recollect.memory.workspace import Workspace, register_workspace
from recollect.runner import ask

data = sys.argv[1]
register_workspace(Workspace(data, embeddings=HashEmbeddings()))
ctx = AllMethodsContext(data_dir=data, chat_model=scripted(default={"answer": "Biscuit", "supports": []}))
ingest_conversation(load_conversation(sys.argv[2]), "pkg", ctx, methods=["memr3"])
out = ask("pkg", "What is the name of Maya's dog?", "rag", ctx)
print(json.dumps({"app": recollect.__file__, "prompts": str(recollect.prompts.PROMPTS_DIR), "answer": out["answer"],
                  "prompt_seen": "Answer the question" in ctx.chat_model.prompts()[0]}))
"""


def test_dependencies_are_ranges_without_unused_packages() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {d.split(">")[0].split("<")[0].split("=")[0].split("[")[0].strip(): d for d in project["dependencies"]}
    assert "langchain-chroma" not in core and "nltk" not in core  # unused / eval only
    assert "nltk" in " ".join(project["optional-dependencies"]["eval"])
    assert not any("==" in d or "<=" in d for d in core.values()), core
    assert core["langchain-core"].replace(" ", "").endswith("<2")


def test_wheel_installs_and_answers_with_packaged_prompts(tmp_path: Path) -> None:
    wheel_dir = tmp_path / "wheel"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(wheel_dir), str(ROOT)], check=True, capture_output=True, cwd=ROOT)
    wheel = next(wheel_dir.glob("recollect-*.whl"))

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "project_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                    "-q", str(wheel)], check=True, capture_output=True)

    run = subprocess.run([str(python), "-c", SCRIPT, str(tmp_path / "data"), str(ROOT / "examples" / "sample_dialogue.json")],
                         capture_output=True, text=True, cwd=tmp_path, env={"PATH": "/usr/bin:/bin",
                                                                            "RECOLLECT_EMBEDDER": "hash",
                                                                            "HOME": str(tmp_path)})
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["app"].startswith(str(site))  # the installed copy, not the checkout
    assert out["prompts"].startswith(str(site)) and out["prompts"].endswith("prompt_files")
    assert out["answer"] == "Biscuit" and out["prompt_seen"]
