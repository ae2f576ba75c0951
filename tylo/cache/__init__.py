"""tylo's kernel cache: keys (:func:`cache_key`) and the on-disk store (:class:`DiskCache`).

See docs/cache.md for the layout, the environment variables and the CLI.
"""

from .disk import (
    CacheEntry,
    CacheKeyError,
    DiskCache,
    TyloCacheWarning,
    default_cache,
    default_cache_root,
)
from .key import cache_key, canonical_json

__all__ = [
    "CacheEntry",
    "CacheKeyError",
    "DiskCache",
    "TyloCacheWarning",
    "cache_key",
    "canonical_json",
    "default_cache",
    "default_cache_root",
]
