"""Hardware ops (``nv.<feature>.*``): one module per feature, named as in every other layer.

Importing this package defines every hardware op in ``tylo.ir.ops.OPS``. ``FEATURES`` lists
the feature modules; each has its namesake in ``tylo/lang``, ``tylo/codegen/ptx`` and
``tylo/interpreter`` (a test holds the layers to it). ``address`` (``nv.shared_address``) is
shared by several features (matrix descriptors, TMEM allocation) rather than a feature of its
own; ``bitfields`` packs the descriptor words of wgmma and tcgen05 and defines no op.
"""
from . import address, copy, debug, fence, mbarrier, mma, sync, tcgen05, tma, tmem, wgmma  # noqa: F401 - define the ops

FEATURES = ("copy", "mma", "tma", "mbarrier", "fence", "sync", "wgmma", "tmem", "tcgen05", "debug")
SHARED_MODULES = ("address",)

__all__ = ["FEATURES", "SHARED_MODULES"]
