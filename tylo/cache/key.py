"""Cache keys: sha256 over a canonical JSON form of the key components.

The JIT passes a dict such as::

    {"tylo": "0.1.0", "llvm": "22.1.0", "nvjitlink": "13.5",
     "sources": [kernel source, helper sources..., global constexpr reprs...],
     "specialization": [...], "constexprs": {...}, "target": "sm_90a",
     "options": {...}}

Only str, int, float, bool, None, lists and dicts with str keys are accepted,
so that two different inputs can never serialize alike (a tuple would print
as a list, an object's repr may hold an address): anything else raises
TypeError naming where it was found.
"""

from __future__ import annotations

import hashlib
import json

__all__ = ["cache_key", "canonical_json"]

# Bumped when the serialization below changes, so old keys never match.
_SCHEME = "tylo-cache-key-v1\n"


def _check(value: object, where: str) -> None:
    t = type(value)
    if value is None or t is str or t is bool or t is int:
        return
    if t is float:
        return  # repr-exact in JSON; inf and nan print as Infinity / NaN
    if t is list:
        for i, item in enumerate(value):
            _check(item, f"{where}[{i}]")
        return
    if t is dict:
        for k, item in value.items():
            if type(k) is not str:
                raise TypeError(
                    f"cache_key: {where} has a key {k!r} of type {type(k).__name__}; keys must be str"
                )
            _check(item, f"{where}[{k!r}]")
        return
    raise TypeError(
        f"cache_key: {where} is a {t.__name__} ({value!r:.80}); key components must be "
        f"str, int, float, bool, None, list or dict (convert tuples to lists, objects to a stable str)"
    )


def canonical_json(components: dict) -> str:
    """The canonical text that :func:`cache_key` hashes (sorted keys, no spaces)."""
    if type(components) is not dict:
        raise TypeError(f"cache_key: components must be a dict, not {type(components).__name__}")
    _check(components, "components")
    return json.dumps(components, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True)


def cache_key(components: dict) -> str:
    """64 hex digits: the sha256 of the canonical JSON form of ``components``."""
    text = _SCHEME + canonical_json(components)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
