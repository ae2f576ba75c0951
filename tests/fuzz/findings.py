"""The root causes the fuzzers found (FINDINGS.md), and how to recognise a fuzz result as one of them.

``finding_of(kind, result)`` names the finding a failing result belongs to (None for a new one);
scripts/fuzz.py labels its failure groups with it (a fixed finding seen again is marked a regression).
``FIXED`` says where each finding was fixed; the default test slices mark cases that fail today with
``xfail(strict=True, reason=<id>)`` (none at the moment).
"""
from __future__ import annotations

import re

# id: (issue 16 item or "new", title)
FINDINGS = {
    "F01": ("1", "nested runtime loops that both break: internal compiler error KeyError '%iv'"),
    "F02": ("1 (variant)", "an unrolled loop with a runtime break, then a runtime while, inside a runtime loop: "
                           "'<...Undefined object at 0x...> cannot be combined with a runtime i32'"),
    "F03": ("2", "integer abs lowers to llvm.fabs.f64: RuntimeError from LLVM, no source line"),
    "F04": ("3", "an f32 literal outside the f32 range fails in LLVM's IR parser"),
    "F05": ("5", "fp8 -> bool conversion: internal compiler error 'conversion f16 -> bool'"),
    "F06": ("4", "(f16 % bf16).to(bf16) trips an LLVM assertion: SIGABRT kills the process"),
    "F07": ("6", "constant folding keeps f32 constants unrounded"),
    "F08": ("7", "folding i64 -> f32 rounds twice"),
    "F09": ("9", "a variable assigned before a runtime for keeps its pre-loop value after the loop"),
    "F10": ("10", "`x and True` / `x or False` on a runtime int store x"),
    "F11": ("13", "interpreter: 1.0 / -0.0 gives +inf"),
    "F12": ("13", "interpreter: integer abs goes through float32 (abs(16777217) == 16777216; ~ then overflows)"),
    "F13": ("new", "interpreter: converting a large Python int (u64) to bf16 raises TypeError"),
    "F14": ("new", "// and % on two bools are rejected; docs: arithmetic on two bools gives i32"),
    "F15": ("new", "storing an int into a *bool is rejected; docs: a store converts to the pointee type"),
    "F16": ("new", "tylo.f8e4m3(1.5) and tylo.i32(2.5) on Python constants are rejected; docs: dtype calls "
                   "convert with the C rules"),
    "F17": ("new", "`/` on two ints of different signedness promotes first (i8 -20 / u8 4 = 59.0); docs: ints "
                   "are converted to f32 first (-5.0)"),
    "F20": ("11", "wrong arity or keywords to builtins: internal compiler error TypeError"),
    "F21": ("11", "failing compile-time constants (10**400, 1 << 200, log(-1.0), sqrt(-4.0)): internal "
                  "compiler error OverflowError/ValueError"),
    "F22": ("11", "constexpr None (or another type) compared with an int: internal compiler error TypeError"),
    "F23": ("11", "CompileError messages holding a Python object repr (module, class, object)"),
    "F24": ("12", "signature strings outside the grammar are accepted (*f32:xyz, *f32:8, empty entries, "
                  "trailing comma)"),
    "F25": ("new", "a shared_array far beyond shared memory (2**40 elements) compiles without an error"),
    "F26": ("new", "misc. invalid kernels that compile without an error"),
    "F30": ("17", "meta.json's dynamic_shared_bytes is not covered by a digest: a changed value is served"),
    "F31": ("17", "a meta.json without the cubin's digest serves an unverified (damaged) cubin"),
    "F32": ("17", "a meta.json that does not list kernel.tyir, with the file gone: FileNotFoundError from compile()"),
    "F33": ("18", "an entry file that is a FIFO hangs the lookup"),
    "F34": ("18", "a killed writer's .tmp- folder survives the next write"),
    "F35": ("18", "the cached NoGPUError's traceback grows with every launch attempt"),
    "F36": ("14", "the key holds tylo's version string only: a tylo with other sources loads old entries"),
    "F37": ("15", "key holes: a global dict, a numpy integer, modules named math*/tylo*, a helper in a dict, "
                  "a config object's method, a global read before a same-name local"),
    "F38": ("16", "a helper edited and reloaded in one process still compiles under the old key"),
}

# id: where it was fixed (merge commit on main, or this branch's area). Their reproducers stay in the default
# run as regression tests, asserting the fixed behaviour; a result that matches one again is a regression.
_FRONTEND = "the frontend (merge cebc31a, wt-frontend)"
_NUMERICS = "exact scalar semantics, ir/scalars.py (merge abf283d, wt-numerics)"
_CACHE = "the cache and its keys (merge c6d8977, wt-cache)"
FIXED = {
    "F01": _FRONTEND, "F02": _FRONTEND, "F09": _FRONTEND, "F10": _FRONTEND,
    "F03": _NUMERICS, "F04": _NUMERICS, "F05": _NUMERICS, "F06": _NUMERICS + ": LLVM failures are CompileErrors",
    "F07": _NUMERICS, "F08": _NUMERICS, "F11": _NUMERICS, "F12": _NUMERICS, "F13": _NUMERICS,
    "F14": "lang/core.py binary(): // and % on two bools convert to i32 like + - * (wt-fuzzfix)",
    "F15": "lang/core.py store_converts(): an int stored into *bool converts (x != 0) (wt-fuzzfix)",
    "F16": "lang/core.py converted_constant(): dtype calls and tylo.cast on Python constants apply the "
           "conversion rules at compile time (wt-fuzzfix)",
    "F17": "lang/core.py binary(): `/` converts each int operand to f32 in its own type (wt-fuzzfix)",
    "F20": _FRONTEND, "F21": _FRONTEND, "F22": _FRONTEND,
    "F23": _FRONTEND + "; the module/class reprs of unknown tylo names and cast targets by wt-fuzzfix",
    "F24": "the signature grammar, tylo/specialization.py (merge c6d8977)",
    "F25": "the JIT refuses a shared_array beyond the architecture's shared memory (merge c6d8977)",
    "F30": _CACHE, "F31": _CACHE, "F32": _CACHE, "F33": _CACHE, "F34": _CACHE, "F35": _CACHE,
    "F36": "tylo/_version.py source_digest() (merge c6d8977); the fault itself ran the original tylo when "
           "started from the repository root (fixed in cache_faults.py by wt-fuzzfix)",
    "F37": _CACHE, "F38": _CACHE,
}

_VALID_PATTERNS = [
    ("F01", r"KeyError: '%iv'"),
    ("F02", r"Undefined object at"),
    ("F03", r"llvm\.fabs|Intrinsic has incorrect return type"),
    ("F04", r"floating point constant invalid"),
    ("F05", r"conversion f16 -> bool|conversion f8\w* -> bool"),
    ("F13", r"expected number, got int"),
    ("F12", r"Python integer \d+ out of bounds for"),   # `~` after an integer abs through float32
    ("F14", r"on bools is not defined"),
    ("F15", r"into \*bool"),
    ("F16", r"is a storage type; constants must|is not an integer and cannot be a|\d\.\d+ does not fit in"),
]
_INVALID_BY_TEMPLATE = {
    "sig_bad_suffix": "F24", "sig_align8": "F24", "sig_empty_entry": "F24", "sig_trailing_comma": "F24",
    "shared_huge": "F25",
}
_INVALID_PATTERNS = [
    ("F21", r"internal compiler error: (OverflowError|ValueError: math domain)"),
    ("F22", r"internal compiler error: TypeError: '.' not supported between"),
    ("F20", r"internal compiler error: TypeError"),
    ("F23", r"Python object repr"),
]
_CACHE_BY_FAULT = {
    "meta_shared_bytes": "F30", "meta_bit_flip_valid_json": "F30", "meta_drop_cubin_digest": "F31",
    "meta_drop_tyir": "F32", "fifo": "F33", "kill9": "F34", "nogpu": "F35", "tylo_sources": "F36",
    "in_process_edit": "F38",
}


def finding_of(kind: str, result: dict) -> str | None:
    if result.get("status") in ("ok", "expected"):
        return None
    detail = result.get("detail", "") or ""
    if kind == "valid":
        if result.get("status") == "crash":
            return "F06"
        for fid, pat in _VALID_PATTERNS:
            if re.search(pat, detail):
                return fid
        return None
    if kind == "invalid":
        fid = _INVALID_BY_TEMPLATE.get(result.get("template"))
        if fid and result["status"] in ("no_error", "not_compile_error"):
            return fid
        for fid, pat in _INVALID_PATTERNS:
            if re.search(pat, detail):
                return fid
        for fid, pat in _VALID_PATTERNS:   # the base kernel's own bugs met first
            if re.search(pat, detail):
                return fid
        return None
    fault = result.get("fault", "")
    if fault.startswith("key_"):
        return "F37"
    return _CACHE_BY_FAULT.get(fault)
