"""The target table: each supported GPU architecture and its PTX ISA version."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Target", "TARGETS", "get_target"]


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
