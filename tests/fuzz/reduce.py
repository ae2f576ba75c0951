"""Shrink a failing kernel file to a small reproducer: delete lines (a line with its indented block)
as long as compiling still fails with the same normalised message.

    python tests/fuzz/reduce.py failing_kernel.py --kernel k_37 --signature "*f32, i32" [--constexprs '{"C0": 1}']
"""
from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import re
import sys
import warnings


def failure(source: str, kernel: str, signature: str, constexprs: dict, archs=("sm_90a",), run_args=None) -> str | None:
    """The normalised failure of compiling ``source`` (None when it compiles, or does not parse);
    with ``run_args`` (a function returning fresh arguments), of running it in the interpreter."""
    try:
        ast.parse(source)
    except SyntaxError:
        return None
    path = "/tmp/tylo_fuzz_reduce_candidate.py"
    with open(path, "w") as f:
        f.write(source)
    name = f"tylo_fuzz_reduce_{abs(hash(source))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            spec.loader.exec_module(module)
            k = getattr(module, kernel)
            if run_args is not None:
                from tylo.interpreter import run
                run(k.lower(signature=signature, constexprs=constexprs), run_args(), grid=(1,), block=(1,))
                return None
            for arch in archs:
                k.compile(signature=signature, arch=arch, constexprs=constexprs)
    except Exception as exc:  # noqa: BLE001
        text = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}".split("\n")[0]
        text = re.sub(r"0x[0-9a-f]+", "0x..", text)
        return re.sub(r"\(inlined from [^)]*\)", "", text)
    return None


def _block_end(lines, i):
    ind = len(lines[i]) - len(lines[i].lstrip())
    j = i + 1
    while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > ind):
        j += 1
    return j


def reduce(source, kernel, signature, constexprs, target=None, run_args=None):
    target = target or failure(source, kernel, signature, constexprs, run_args=run_args)
    if target is None:
        raise ValueError("the kernel compiles: nothing to reduce")
    lines = source.split("\n")
    changed = True
    while changed:
        changed = False
        i = len(lines) - 1
        while i >= 0:
            line = lines[i]
            if not line.strip() or line.startswith(("import", "@tylo.jit", "def " + kernel)):
                i -= 1
                continue
            end = _block_end(lines, i)
            for candidate in (lines[:i] + lines[end:], lines[:i] + [line[: len(line) - len(line.lstrip())] + "pass"]
                              + lines[end:]):
                if candidate == lines:
                    continue
                if failure("\n".join(candidate), kernel, signature, constexprs, run_args=run_args) == target:
                    lines = candidate
                    changed = True
                    break
            i = min(i, len(lines)) - 1
    return "\n".join(lines), target


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--signature", required=True)
    ap.add_argument("--constexprs", default="{}")
    args = ap.parse_args(argv)
    src, target = reduce(open(args.file).read(), args.kernel, args.signature, json.loads(args.constexprs))
    print(f"# failure: {target}\n{src}")


if __name__ == "__main__":
    sys.exit(main())
