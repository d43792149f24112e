"""The lenient reply-field coercions shared by every graph's schemas."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel, ValidationError

from recollect.llm.lenient import StrList, Text, as_int_or_raw, as_str_list, as_text


def test_as_text() -> None:
    assert as_text(None) == ""
    assert as_text("  Pixel \n") == "Pixel"
    assert as_text(2022) == "2022"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, []),
        ("none", []),
        (" N/A ", []),
        ("[]", []),
        ("cat, dog; bird\nfish", ["cat", "dog", "bird", "fish"]),
        (["cat", None, 3, {"x": 1}, ["y"], "  "], ["cat", "3"]),
        ({"a": "cat", "b": "dog"}, ["cat", "dog"]),
        (7, 7),  # left for validation to reject
    ],
)
def test_as_str_list(raw: object, expected: object) -> None:
    assert as_str_list(raw) == expected


def test_as_int_or_raw() -> None:
    assert as_int_or_raw(" 2 ") == 2 and as_int_or_raw("-1") == -1 and as_int_or_raw(True) == 1
    assert as_int_or_raw("two") == "two" and as_int_or_raw(1.5) == 1.5


class _Reply(BaseModel):
    answer: Text
    keywords: StrList = []
    flag: Literal[0, 1] = 0


def test_annotated_types_in_a_schema() -> None:
    r = _Reply.model_validate({"answer": None, "keywords": "a, b"})
    assert r.answer == "" and r.keywords == ["a", "b"]
    # the JSON schema sent to the endpoint stays plain
    props = _Reply.model_json_schema()["properties"]
    assert props["answer"]["type"] == "string" and props["keywords"]["items"]["type"] == "string"
    with pytest.raises(ValidationError):
        _Reply.model_validate({"answer": "x", "keywords": 7})
