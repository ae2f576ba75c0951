"""Does -lineinfo change register allocation? Assemble the examples' PTX with and without it
through this machine's nvJitLink and print registers and spills side by side."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))

from tylo.codegen import nvjitlink  # noqa: E402
from tylo.codegen.compile import parse_resources  # noqa: E402


def main():
    import warp_gemm

    print("nvJitLink", nvjitlink.version())
    for kernel, signature, constexprs, block in warp_gemm.AOT:
        for lineinfo in (False, True):
            ck = kernel.compile(signature=signature, arch="sm_90a", constexprs=constexprs, block=block)
            ptx = ck.ptx
            if not lineinfo:  # the PTX without .loc/.file lines
                ptx = "\n".join(ln for ln in ptx.splitlines() if not ln.lstrip().startswith((".loc", ".file")))
            for opts in (("-O3",), ("-O3", "-lineinfo")):
                _, log = nvjitlink.link_ptx(ptx, "sm_90a", kernel.__name__, opts)
                r = parse_resources(log)
                print(f"{kernel.__name__} {constexprs} loc-lines={lineinfo} opts={opts}: "
                      f"{r.registers} regs, {r.spill_store_bytes}+{r.spill_load_bytes} spill B")


if __name__ == "__main__":
    main()
