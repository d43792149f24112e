"""The built wheel, installed non-editable into a fresh venv, works inside someone else's app.

A host application with its own top-level `app/` and `graphs/` packages imports both those and
recollect; every graph is built through the public API and answers from the bundled sample with a
scripted model; `recollect serve --port 0` from that venv, in a directory that is not the checkout,
answers an SDK run. Offline: the wheel is built without isolation, and the fresh venv reaches the
project venv's dependencies through a .pth line (a plain path, so the project's editable install
of recollect is not visible there); pip installs the wheel alone with --no-deps --no-index.
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import stop_process_group
from tests.service.scripted_endpoint import ScriptedEndpoint

pytestmark = [pytest.mark.service]
ROOT = Path(__file__).resolve().parents[2]

HOST_SCRIPT = r"""
import json, sys
import app, graphs.memr3                       # the host's own packages
import recollect
from recollect import create_graph, ingest, available_methods
from recollect.llm.scripted import scripted
from recollect.packaged import sample_dialogue_path
from recollect.prompts import PROMPTS_DIR

def reply(msgs, kw):
    return {"answer": "Biscuit", "supports": ["D1:3"], "evidence": ["[D1:3] the dog is Biscuit"], "gaps": [],
            "decision": "answer", "detailed_answer": "Biscuit", "sufficient": True, "finished": 1}

model = scripted(default=reply)
data = sys.argv[1]
ingest(sample_dialogue_path(), "pkg", data_dir=data, chat_model=model)
answers = {}
for method in available_methods():
    graph = create_graph(method, chat_model=model, data_dir=data)
    out = graph.invoke({"namespace": "pkg", "question": "What is the name of Maya's dog?"})
    answers[method] = out["answer"]
print(json.dumps({"host_app": app.WHO, "host_graphs": graphs.memr3.WHO, "recollect": recollect.__file__,
                  "prompts": str(PROMPTS_DIR), "sample": str(sample_dialogue_path()), "answers": answers}))
"""


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    tmp = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp / "dist"), str(ROOT)], check=True, capture_output=True, cwd=tmp)
    wheel = next((tmp / "dist").glob("recollect-*.whl"))
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "project_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                    "-q", str(wheel)], check=True, capture_output=True)
    yield wheel, python


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": str(tmp), "RECOLLECT_EMBEDDER": "hash",
            "ANONYMIZED_TELEMETRY": "False", **extra}


def test_the_wheel_installs_one_import_package(wheel_venv: tuple[Path, Path]) -> None:
    wheel, _ = wheel_venv
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert tops == {"recollect"}
    for packaged in ("recollect/prompt_files/memr3/answer.md", "recollect/sample_dialogue.json",
                     "recollect/langgraph.json", "recollect/graphs/memr3/graph.py"):
        assert packaged in names, packaged


def test_beside_a_host_app_every_graph_answers(wheel_venv: tuple[Path, Path], tmp_path: Path) -> None:
    _, python = wheel_venv
    host = tmp_path / "host"
    (host / "app").mkdir(parents=True)
    (host / "app" / "__init__.py").write_text("WHO = 'host app'\n")
    (host / "graphs").mkdir()
    (host / "graphs" / "__init__.py").write_text("")
    (host / "graphs" / "memr3.py").write_text("WHO = 'host graphs'\n")
    run = subprocess.run([str(python), "-c", HOST_SCRIPT, str(tmp_path / "data")], capture_output=True, text=True,
                         cwd=host, env=_env(tmp_path))
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["host_app"] == "host app" and out["host_graphs"] == "host graphs"
    site = str(python.parent.parent)
    for key in ("recollect", "prompts", "sample"):
        assert out[key].startswith(site), (key, out[key])  # the installed copy, not the checkout
    assert set(out["answers"]) == {"memr3", "rag", "full_context", "mragent", "hymem", "mgretrieval"}
    assert out["answers"]["rag"] == "Biscuit" and all(out["answers"].values())


def test_serve_from_the_wheel_answers_an_sdk_run(wheel_venv: tuple[Path, Path], tmp_path: Path) -> None:
    from langgraph_sdk import get_sync_client

    _, python = wheel_venv
    data = tmp_path / "data"
    cli = [str(python), "-m", "recollect.cli", "--data-dir", str(data)]
    with ScriptedEndpoint() as endpoint:
        env = _env(tmp_path, RECOLLECT_LLM_BASE_URL=endpoint, RECOLLECT_LLM_MODEL="scripted",
                   RECOLLECT_LLM_API_KEY="x")
        ingest = subprocess.run([*cli, "ingest", "sample", "-n", "demo", "--methods", "memr3"], cwd=tmp_path,
                                env=env, capture_output=True, text=True)
        assert ingest.returncode == 0, ingest.stderr[-2000:]
        log = open(tmp_path / "serve.log", "w+")  # noqa: SIM115
        proc = subprocess.Popen([*cli, "serve", "--port", "0"], cwd=tmp_path, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            url = None
            deadline = time.monotonic() + 180
            while url is None and time.monotonic() < deadline:
                assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
                for line in (tmp_path / "serve.log").read_text().splitlines():
                    if line.startswith("serving ") and " on http://" in line:
                        url = line.rsplit(" on ", 1)[1].strip()
                time.sleep(0.5)
            assert url, (tmp_path / "serve.log").read_text()[-3000:]
            client = get_sync_client(url=url)
            thread = client.threads.create()["thread_id"]
            out = client.runs.wait(thread, "rag", input={"namespace": "demo",
                                                         "question": "What is the name of Maya's dog?"})
            assert out["answer"] == "Biscuit"
            assert (data / "server" / "langgraph.json").is_file()  # the generated config, not the checkout's
        finally:
            stop_process_group(proc)
            log.close()
