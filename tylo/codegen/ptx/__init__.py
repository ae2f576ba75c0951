"""Inline-PTX templates and lowerings, one module per hardware feature (same names as ``tylo/ir/nv``).

Each feature module registers its lowerings in ``tylo.codegen.registry`` when imported; this
package imports them all, so the registry is complete before any kernel is lowered. ``core``
holds the PTX the scalar lowerings of the emitter use (fp8 conversions, special functions).
"""
from . import address, copy, core, debug, fence, mbarrier, mma, sync, tcgen05, tma, tmem, wgmma  # noqa: F401 - register the lowerings

__all__ = []
