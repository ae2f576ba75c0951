"""Host-side memos of bounded size: prepared launches, TMA bindings, offset arrays.

Their entries keep device arrays alive (a binding holds its array), so a memo must not grow without
bound; the entries are cheap to remake, so a memo that reaches its limit simply forgets everything
(no recency bookkeeping on the launch path, where a hit is one dict lookup)."""
from __future__ import annotations

__all__ = ["BoundedMemo"]


class BoundedMemo(dict):
    """A dict of at most ``limit`` entries: adding one to a full memo first empties it."""

    def __init__(self, limit: int):
        super().__init__()
        if limit < 1:
            raise ValueError(f"a BoundedMemo holds at least one entry, got limit {limit}")
        self.limit = limit

    def put(self, key, value):
        """``self[key] = value``, emptying a full memo first; returns ``value``."""
        if key not in self and len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value

    def get_or_make(self, key, make):
        """The entry of ``key``, made by ``make()`` and put when missing (None is not an entry)."""
        value = self.get(key)
        return self.put(key, make()) if value is None else value
