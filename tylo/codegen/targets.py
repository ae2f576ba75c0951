"""The target table: each supported GPU architecture and its PTX ISA version."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Target", "TARGETS", "get_target", "target_for_capability", "ResourceLimits", "resource_limits"]


@dataclass(frozen=True)
class Target:
    name: str          # as given to ptxas / nvJitLink: sm_90a
    sm: int            # 90
    ptx_version: int   # PTX ISA version x10: 80 means .version 8.0
    arch_specific: bool  # the 'a' targets: features that run only on this exact architecture

    @property
    def llvm_features(self) -> str:
        return f"+ptx{self.ptx_version}"

    @property
    def ptx_isa(self) -> str:
        return f"{self.ptx_version // 10}.{self.ptx_version % 10}"


# PTX ISA versions: the first that supports each target (PTX ISA release notes),
# raised where tylo emits newer instructions for that target.
TARGETS: dict[str, Target] = {t.name: t for t in (
    Target("sm_80", 80, 70, False),
    Target("sm_86", 86, 71, False),
    Target("sm_89", 89, 84, False),   # 8.4: fp8 mma.sync
    Target("sm_90", 90, 84, False),
    Target("sm_90a", 90, 84, True),
    Target("sm_100a", 100, 86, True),
    Target("sm_120a", 120, 87, True),
)}


def get_target(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        raise ValueError(f"unknown target {name!r}; supported: {', '.join(TARGETS)}") from None


def target_for_capability(major: int, minor: int) -> str:
    """The target a device of compute capability ``major.minor`` compiles for (the JIT's and the
    autotuner's choice): the exact SM with its arch-specific features (sm_90a), else the newest
    target of the same major version below it, the portable one where both exist."""
    sm = major * 10 + minor
    same = [t for t in TARGETS.values() if t.sm == sm]
    if same:
        return max(same, key=lambda t: t.arch_specific).name
    lower = [t for t in TARGETS.values() if t.sm // 10 == major and t.sm <= sm]
    if not lower:
        raise RuntimeError(f"tylo has no target for compute capability {major}.{minor}: it compiles for "
                           f"{', '.join(TARGETS)} (compute capability 8.0 or newer)")
    return max(lower, key=lambda t: (t.sm, not t.arch_specific)).name


@dataclass(frozen=True)
class ResourceLimits:
    """What one thread block may use on a target (CUDA C++ Programming Guide, table of technical
    specifications per compute capability); the autotuner prunes configurations against it."""

    shared_bytes_per_block: int            # opt-in maximum, static + dynamic (cudaDevAttrMaxSharedMemoryPerBlockOptin)
    reserved_shared_bytes: int = 1024      # the driver's own per block (sm_80+), outside that maximum;
                                           # nvJitLink reports 1024 static bytes for every sm_90a kernel
                                           # (0 for sm_80, sm_100a), taken to be this reserve
    registers_per_block: int = 65536       # 32-bit registers; also the register file of one SM
    register_allocation_unit: int = 256    # registers are allocated per warp in units of this many
    threads_per_block: int = 1024
    cluster_blocks: int = 1                # portable thread-block-cluster size (1: no clusters)

    def registers_used(self, registers_per_thread: int, threads: int) -> int:
        """Registers a block of ``threads`` threads takes from the register file."""
        unit = self.register_allocation_unit
        per_warp = -(-registers_per_thread * 32 // unit) * unit
        return -(-threads // 32) * per_warp


_KIB = 1024
_RESOURCE_LIMITS: dict[int, ResourceLimits] = {
    80: ResourceLimits(shared_bytes_per_block=163 * _KIB),
    86: ResourceLimits(shared_bytes_per_block=99 * _KIB),
    89: ResourceLimits(shared_bytes_per_block=99 * _KIB),
    90: ResourceLimits(shared_bytes_per_block=227 * _KIB, cluster_blocks=8),
    100: ResourceLimits(shared_bytes_per_block=227 * _KIB, cluster_blocks=8),
    120: ResourceLimits(shared_bytes_per_block=99 * _KIB, cluster_blocks=8),
}


def resource_limits(target: Target | str) -> ResourceLimits:
    """The per-block limits of ``target`` (a Target or its name)."""
    t = get_target(target) if isinstance(target, str) else target
    return _RESOURCE_LIMITS[t.sm]
