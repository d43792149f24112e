"""The one budget packer every method uses."""

from __future__ import annotations

from recollect.budget import TokenBudget, pack, pack_batches

SIZES = {"a": 4, "b": 5, "c": 2, "d": 9}


def size(x: str) -> int:
    return SIZES[x]


def test_pack_stops_at_the_first_item_that_does_not_fit() -> None:
    out = pack("abcd", 10, size)
    assert out.kept == ["a", "b"] and out.dropped == ["c", "d"] and out.used == 9


def test_pack_can_skip_an_item_and_try_the_next() -> None:
    out = pack("adbc", 10, size, on_overflow="skip")
    assert out.kept == ["a", "b"] and out.dropped == ["d", "c"]  # c no longer fits after a and b (4+5+2 > 10)
    assert pack("dac", 8, size, on_overflow="skip").kept == ["a", "c"]


def test_pack_counts_what_is_already_used_and_can_keep_the_first_item() -> None:
    assert pack("ab", 10, size, used=8).kept == []
    assert pack("ab", 10, size, used=8, keep_first=True).kept == ["a"]
    assert pack("d", 5, size, keep_first=True).used == 9


def test_pack_batches_cuts_consecutive_batches_and_never_leaves_one_empty() -> None:
    assert pack_batches("abcd", 10, lambda x, _: size(x)) == [["a", "b"], ["c"], ["d"]]
    assert pack_batches("d", 5, lambda x, _: size(x)) == [["d"]]
    positions: list[int] = []
    pack_batches("abc", 100, lambda x, pos: positions.append(pos) or 1)
    assert positions == [1, 2, 3]
    assert pack_batches("ab", 10, lambda x, _: size(x), base=2) == [["a"], ["b"]]


def test_token_budget_takes_lines_while_they_fit() -> None:
    room = TokenBudget(6, per_line=1)
    assert room.take("one two") and not room.take("three four five six seven")
    assert room.left < 6
