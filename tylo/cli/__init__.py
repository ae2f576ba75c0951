"""The ``tylo`` command: cache inspection, ahead-of-time compilation, versions.

    tylo cache list | show KEY | dump KEY --stage ir|llvm|ptx|sass
    tylo cache clear KEY | --all | --older-than DAYS
    tylo cache path [KEY]
    tylo compile FILE.py:KERNEL --signature SIG [--arch sm_90a] [--block X[,Y,Z]] [--constexpr NAME=VALUE ...]
    tylo info

One module per command (``cache``, ``compile``, ``info``), the formatting they share
(``formatting``) and the disassembler lookup (``disasm``). ``main(argv)`` returns the exit
status: 0 on success, 1 for errors (unknown key, compile error, missing tool), 2 for bad usage.
"""

from __future__ import annotations

import argparse
import os
import sys

from .cache import cmd_cache_clear, cmd_cache_dump, cmd_cache_list, cmd_cache_path, cmd_cache_show
from .compile import cmd_compile, parse_block
from .disasm import NVDISASM_MISSING, find_disassembler
from .errors import CLIError, UsageError
from .info import cmd_info

__all__ = ["main", "build_parser", "CLIError", "UsageError", "NVDISASM_MISSING", "find_disassembler"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tylo",
        description="tylo: a JIT compiler for layout-typed NVIDIA GPU kernels.",
        epilog="environment: TYLO_CACHE_DIR (cache folder, default ~/.cache/tylo), "
               "TYLO_CACHE=0 (keep compiled kernels in memory only), TYLO_DEBUG=1, TYLO_LINEINFO=0, "
               "TYLO_ALWAYS_COMPILE=1, TYLO_DUMP=folder: all in docs/knobs.md",
    )
    from tylo._version import __version__
    from tylo.codegen.targets import TARGETS

    parser.add_argument("--version", action="version", version=f"tylo {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p_cache = sub.add_parser("cache", help="inspect and clear the kernel cache",
                             description="Inspect and clear the on-disk kernel cache "
                                         "($TYLO_CACHE_DIR, default ~/.cache/tylo).")
    csub = p_cache.add_subparsers(dest="cache_command", metavar="ACTION", required=True)

    p = csub.add_parser("list", help="one row per cached kernel")
    p.add_argument("kernel", metavar="KERNEL", nargs="?",
                   help="only entries of this kernel (name or qualname; shell patterns such as 'gemm*')")
    p.add_argument("--json", action="store_true", help="print the entries as JSON")
    p.set_defaults(func=cmd_cache_list, _parser=p)

    p = csub.add_parser("show", help="an entry's kernel, signature, resources and files")
    p.add_argument("key", metavar="KEY", help="cache key or a unique prefix of it")
    p.add_argument("--json", action="store_true", help="print the entry's meta.json")
    p.set_defaults(func=cmd_cache_show, _parser=p)

    p = csub.add_parser("dump", help="print an entry's IR, LLVM IR, PTX or SASS")
    p.add_argument("key", metavar="KEY", help="cache key or a unique prefix of it")
    p.add_argument("--stage", choices=["ir", "llvm", "ptx", "sass"], default="ptx",
                   help="what to print (default: ptx); sass needs nvdisasm or cuobjdump")
    p.set_defaults(func=cmd_cache_dump, _parser=p)

    p = csub.add_parser("clear", help="remove one entry, all entries, or old ones")
    p.add_argument("key", metavar="KEY", nargs="?", help="remove this entry (key or unique prefix)")
    p.add_argument("--all", action="store_true", help="remove every entry")
    p.add_argument("--older-than", type=float, metavar="DAYS",
                   help="remove entries last used more than DAYS days ago")
    p.set_defaults(func=cmd_cache_clear, _parser=p)

    p = csub.add_parser("path", help="print the cache folder (or an entry's folder)")
    p.add_argument("key", metavar="KEY", nargs="?", help="print this entry's folder instead")
    p.set_defaults(func=cmd_cache_path, _parser=p)

    p = sub.add_parser("compile", help="compile a kernel ahead of time into the cache",
                       description="Compile FILE.py:KERNEL for one signature and print its "
                                   "resource usage and cache key.")
    p.add_argument("target", metavar="FILE.py:KERNEL")
    p.add_argument("--signature", required=True, metavar="SIG",
                   help='runtime argument types, e.g. "*f32:16, *f32:16, i32:16, f32" (*T:16: 16-byte '
                        'aligned pointer; i32:16: divisible by 16; i32=1: equal to 1)')
    p.add_argument("--arch", metavar="ARCH", choices=list(TARGETS),
                   help=f"target: {', '.join(TARGETS)} (default: the kernel's arch option, else sm_90a)")
    p.add_argument("--block", type=parse_block, metavar="X[,Y[,Z]]",
                   help="the launch's block shape; a launch kernel[grid, block] hits this entry only "
                        "when it is the same (default: none, entry for compile() without block)")
    p.add_argument("--constexpr", action="append", metavar="NAME=VALUE",
                   help="value of a tylo.constexpr parameter: a Python literal or a dtype name "
                        "(OUT=f16); repeatable")
    p.add_argument("--option", action="append", metavar="KEY=VALUE",
                   help="compiler option (Python literal); repeatable")
    p.add_argument("--traceback", action="store_true", help="show tracebacks of errors")
    p.set_defaults(func=cmd_compile, _parser=p)

    p = sub.add_parser("info", help="versions of tylo and its toolchain, GPUs, cache folder")
    p.add_argument("--json", action="store_true", help="print the same facts as JSON")
    p.set_defaults(func=cmd_info, _parser=p)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    try:
        return int(args.func(args) or 0)
    except UsageError as e:
        # Report it as argparse would: usage line, then "PROG: error: ...".
        p = getattr(args, "_parser", parser)
        p.print_usage(sys.stderr)
        print(f"{p.prog}: error: {e}", file=sys.stderr)
        return 2
    except CLIError as e:
        print(str(e) if e.raw else f"error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # Output piped into `head` and the like: stop quietly.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
