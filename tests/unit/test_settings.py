"""Runtime settings Studio can show and the server can trust: every field described, every value
type- and range-checked with one error naming the setting (CLI exit 2, never a traceback)."""

from __future__ import annotations

import socket
from dataclasses import fields

import pytest
from recollect.cli import main
from recollect.config import Context, ContextError
from recollect.graphs.baselines.graph import rag


def test_every_setting_has_a_description_in_the_studio_schema() -> None:
    props = rag.get_context_jsonschema()["properties"]
    missing = [f.name for f in fields(Context) if not props.get(f.name, {}).get("description")]
    assert missing == []


def test_counts_and_sizes_have_ranges() -> None:
    props = rag.get_context_jsonschema()["properties"]
    for name in ("memr3_max_iterations", "memr3_top_k", "rag_top_k", "mra_max_rounds", "hymem_light_k",
                 "mg_max_rounds", "max_prompt_tokens"):
        assert props[name].get("minimum", -1) >= 1, name
    assert props["mra_jaccard"]["minimum"] == 0 and props["mra_jaccard"]["maximum"] == 1


@pytest.mark.parametrize(("overrides", "message"), [
    ({"memr3_max_iterations": "abc"}, "setting memr3_max_iterations: input should be a valid integer"),
    ({"memr3_max_iterations": -3}, "setting memr3_max_iterations: must be at least 1"),
    ({"memr3_top_k": True}, "setting memr3_top_k: expected a number"),
    ({"mra_jaccard": 1.5}, "setting mra_jaccard: must be at most 1"),
    ({"memr3_rerank": "bogus"}, "setting memr3_rerank: input should be 'none' or 'hybrid'"),
    ({"namespace": "bad name!"}, "setting namespace"),
])
def test_bad_values_name_the_setting(overrides: dict, message: str) -> None:
    with pytest.raises(ContextError, match=message.replace("(", r"\(")):
        Context(**overrides)
    with pytest.raises(ContextError, match="setting"):
        Context().with_overrides(**overrides)


def test_json_strings_are_converted() -> None:
    ctx = Context(memr3_max_iterations="7", mra_jaccard="0.5")
    assert ctx.memr3_max_iterations == 7 and ctx.mra_jaccard == 0.5


@pytest.mark.parametrize("value", ["abc", "-3", "0"])
def test_cli_set_bad_value_is_exit_2(capsys: pytest.CaptureFixture[str], data_dir: str, value: str) -> None:
    code = main(["--data-dir", data_dir, "ask", "q?", "-n", "x", "--set", f"memr3_max_iterations={value}"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: setting memr3_max_iterations") and "Traceback" not in err


def test_serve_fails_clearly_when_the_port_is_taken(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert main(["serve", "--port", str(port)]) == 2
    assert f"port {port} is already in use" in capsys.readouterr().err


def test_settings_command_shows_descriptions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["settings"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("memr3_max_iterations"))
    assert line == "memr3_max_iterations = 5  # MemR3: router calls per question (n_max)"
