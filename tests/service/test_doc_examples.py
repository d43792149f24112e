"""Every Python example in the project's Markdown and in the public API's docstrings runs, as a reader would
run it (as langmem runs its docstring examples).

Each file's ```python blocks (a module's: its docstrings', top to bottom) run in order in one fresh interpreter, sharing their names like a notebook's
cells, with what a reader is assumed to have: a dialogue file named `dialogue.json` in the working
directory (the bundled sample dialogue), a model endpoint (a scripted OpenAI-compatible one; LangChain's
`ChatOpenAI` in an example reaches it through `OPENAI_BASE_URL`), the hashing embedder, and, where a block
talks to `recollect serve` at http://127.0.0.1:2024, a server on a free port with the same data directory
(the URL is the only text the harness changes). A block that raises fails the test with its file and line.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.service.scripted_endpoint import ScriptedEndpoint
from tests.service.serving import ROOT, SAMPLE, start_serve, stop_serve

pytestmark = [pytest.mark.service]

BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
SERVE_URL = "http://127.0.0.1:2024"
DOCS = sorted({ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("graphs/*/*.md")})
# The public API's modules (what `import recollect` exports): their docstrings' examples.
API_MODULES = [ROOT / "app" / "api.py", ROOT / "app" / "recall.py", ROOT / "app" / "agent_memory" / "__init__.py"]

# Runs the blocks of one file: each is compiled under the name "<file>, line <n>", so a traceback points at
# the Markdown, and executed in one namespace.
RUNNER = """
import json, sys
namespace = {"__name__": "__main__"}
for block in json.load(open(sys.argv[1])):
    print(f"--- {block['where']}", flush=True)
    exec(compile(block["source"], block["where"], "exec"), namespace)
# Every block ran: leave without the interpreter's teardown, where native libraries' destructors (torch, chromadb,
# llama.cpp threads) crashed the process with SIGSEGV under the full suite's load after the last block had passed.
sys.stdout.flush()
import os
os._exit(0)
"""


def _blocks(text: str, where: Path, first_line: int = 1) -> list[dict[str, str]]:
    return [{"where": f"{where.relative_to(ROOT)}, line {first_line + text.count(chr(10), 0, m.start()) + 1}",
             "source": m.group(1)} for m in BLOCK.finditer(text)]


def python_blocks(path: Path) -> list[dict[str, str]]:
    """A Markdown file's blocks, or a Python module's docstrings' (module, classes, functions, in order)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        return _blocks(text, path)
    tree = ast.parse(text)
    owners = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef))]
    found = []
    for node in owners:
        doc = ast.get_docstring(node)
        if doc and node.body:  # the docstring's text starts on its expression's first line
            found.append((node.body[0].lineno, _blocks(doc, path, node.body[0].lineno)))
    return [b for _, blocks in sorted(found, key=lambda f: f[0]) for b in blocks]


FILES = [p for p in [*DOCS, *API_MODULES] if python_blocks(p)]


def test_the_examples_are_found() -> None:
    """The harness reads what it should: the README's blocks, and nothing from files without one."""
    assert ROOT / "README.md" in FILES and set(API_MODULES) <= set(FILES)
    assert len(python_blocks(ROOT / "README.md")) >= 6
    assert all(b["source"].strip() for p in FILES for b in python_blocks(p))


def run_blocks(blocks: list[dict[str, str]], tmp_path: Path) -> subprocess.CompletedProcess:
    """The blocks run in one fresh interpreter, in a reader's setting (module docstring)."""
    (tmp_path / "dialogue.json").write_bytes(SAMPLE.read_bytes())
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    with ScriptedEndpoint() as base_url:
        env = dict(os.environ, RECOLLECT_DATA_DIR=str(data), RECOLLECT_EMBEDDER="hash",
                   RECOLLECT_LLM_BASE_URL=base_url, RECOLLECT_LLM_MODEL="scripted", RECOLLECT_LLM_API_KEY="scripted",
                   OPENAI_BASE_URL=base_url, OPENAI_API_KEY="scripted", PYTHONPATH=str(ROOT))
        server = None
        if any(SERVE_URL in b["source"] for b in blocks):
            server, url, _ = start_serve(data, base_url)
            blocks = [{**b, "source": b["source"].replace(SERVE_URL, url)} for b in blocks]
        try:
            (tmp_path / "blocks.json").write_text(json.dumps(blocks))
            return subprocess.run([sys.executable, "-c", RUNNER, str(tmp_path / "blocks.json")], cwd=tmp_path,
                                  env=env, capture_output=True, text=True, timeout=600)
        finally:
            if server is not None:
                stop_serve(server)


def test_a_failing_example_fails_with_its_place(tmp_path: Path) -> None:
    """The harness can fail: an example that raises names its file and line in the traceback."""
    blocks = [{"where": "README.md, line 10", "source": "from recollect import ingest\nx = 1\n"},
              {"where": "README.md, line 20", "source": "assert x == 1\nimport recollect\nrecollect.no_such_name\n"}]
    done = run_blocks(blocks, tmp_path)
    assert done.returncode != 0
    assert 'File "README.md, line 20", line 3' in done.stderr and "no_such_name" in done.stderr


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_the_python_examples_run(path: Path, tmp_path: Path) -> None:
    done = run_blocks(python_blocks(path), tmp_path)
    assert done.returncode == 0, f"{path.relative_to(ROOT)}: an example failed\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
