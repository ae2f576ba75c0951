"""tylo.runtime.memo.BoundedMemo: the bounded host-side memo of prepared launches and bindings."""
import pytest

from tylo.runtime.memo import BoundedMemo


def test_a_full_memo_forgets_everything_before_adding():
    memo = BoundedMemo(3)
    for k in range(3):
        memo.put(k, str(k))
    assert memo == {0: "0", 1: "1", 2: "2"}
    memo.put(1, "one")                 # replacing an entry keeps the others
    assert memo == {0: "0", 1: "one", 2: "2"}
    memo.put(3, "3")
    assert memo == {3: "3"}


def test_get_or_make_makes_once_per_key():
    memo, made = BoundedMemo(2), []

    def make(k):
        made.append(k)
        return k * 10

    assert [memo.get_or_make(k, lambda k=k: make(k)) for k in (1, 1, 2, 1)] == [10, 10, 20, 10]
    assert made == [1, 2]
    assert memo.get_or_make(3, lambda: make(3)) == 30 and dict(memo) == {3: 30}


def test_limit_must_be_positive():
    with pytest.raises(ValueError, match="at least one entry"):
        BoundedMemo(0)
