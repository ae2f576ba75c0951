"""A mutation corpus of invalid kernels: each must give a CompileError at the marked line.

A mutant is a generated valid kernel (kernelgen) cut after some of its top-level statements, with
one mistake inserted there. Every mutation names its category and which lines may carry the error
(usually the inserted line; for a loop-carried type change, the assignment or the loop). The check
(``check_mutant``) compiles the mutant for sm_90a and asks for:

* a ``tylo.CompileError`` (not another exception, not a crash, not a clean compile),
* that is not "internal compiler error" (the mistake is the user's),
* at one of the marked lines,
* whose reason is words, not a Python object's repr.

Mutations of the host API (signature strings that break the grammar) expect ValueError/TypeError.
"""
from __future__ import annotations

import importlib.util
import os
import random
import re
import shutil
from dataclasses import dataclass

from kernelgen import generate, load_generated, render_block
from semantics import FP8_TYPES, is_int

PLAIN_FN = ["def plain_py(a):", "    return a + 1", ""]
BAD_HELPER = ["@tylo.func", "def hbad(a):", "    if a > 0:", "        return a  # MARK", "    return a", ""]


@dataclass
class Mutant:
    seed: int
    template: str
    category: str
    source: str
    kernel_name: str
    signature: str
    constexprs: dict
    lines: set          # acceptable error lines
    host_error: bool = False   # a host API mistake: ValueError/TypeError expected, not CompileError


# Each template: (name, category, needs, text). ``needs`` names the variables the text uses:
# I (an int variable), F (an f32/f16/bf16 variable), D (an f64 variable), B (a bool variable),
# X (any non-fp8 variable), Q (an fp8 variable), P (an output pointer), PI (an integer output pointer),
# N (the runtime loop bound n). Lines after the first are indented one more level when they start with '>'.
# "@" marks which inserted lines may carry the error (default: the first).
TEMPLATES = [
    # wrong arity or keywords to builtins
    ("exp_two_args", "arity", "vbad = tylo.exp(F, F)"),
    ("sqrt_no_args", "arity", "vbad = tylo.sqrt()"),
    ("fma_two_args", "arity", "vbad = tylo.fma(F, F)"),
    ("where_two_args", "arity", "vbad = tylo.where(B, X)"),
    ("min_one_arg", "arity", "vbad = min(X)"),
    ("tylo_max_three", "arity", "vbad = tylo.max(X, X, X)"),
    ("abs_two_args", "arity", "vbad = abs(X, X)"),
    ("print_end_kw", "arity", "print(X, end='')"),
    ("sqrt_keyword", "arity", "vbad = tylo.sqrt(value=F)"),
    ("exp_unknown_kw", "arity", "vbad = tylo.exp(F, fast=True)"),
    ("cast_one_arg", "arity", "vbad = tylo.cast(X)"),
    ("to_no_args", "arity", "vbad = X.to()"),
    ("to_two_args", "arity", "vbad = X.to(tylo.f32, tylo.i32)"),
    ("dtype_two_args", "arity", "vbad = tylo.f32(X, X)"),
    ("shfl_one_arg", "arity", "vbad = tylo.shfl_xor(X)"),
    ("atomic_one_arg", "arity", "vbad = tylo.atomic_add(P)"),
    ("sync_with_arg", "arity", "tylo.sync_threads(1)"),
    ("shared_no_shape", "arity", "vbad = tylo.shared_array(tylo.f32)"),
    ("shared_bad_kw", "arity", "vbad = tylo.shared_array(tylo.f32, (4,), algn=16)"),
    ("static_assert_no_args", "arity", "tylo.static_assert()"),
    ("helper_wrong_arity", "arity", "vbad = hbad(X, X)"),
    # type errors
    ("shift_float", "type", "vbad = F << 2"),
    ("invert_float", "type", "vbad = ~F"),
    ("and_float_int", "type", "vbad = F & I"),
    ("pointer_plus_float", "type", "vbad = P + F"),
    ("pointer_times_int", "type", "vbad = P * 2"),
    ("float_index", "type", "P[F] = X"),
    ("string_plus", "type", "vbad = X + 'a'"),
    ("fp8_arith", "type", "vbad = Q + Q"),
    ("float_into_int_ptr", "type", "PI[0] = F"),
    ("exp_f64", "type", "vbad = tylo.exp(D)"),
    ("subscript_scalar", "type", "vbad = X[0]"),
    ("tuple_plus_int", "type", "vbad = (X, X) + 1"),
    ("sqrt_pointer", "type", "vbad = tylo.sqrt(P)"),
    ("store_pointer", "type", "P[0] = P"),
    ("pointer_compare_float", "type", "vbad = P < F"),
    ("neg_pointer", "type", "vbad = -P"),
    ("power_runtime", "type", "vbad = X ** 2"),
    ("matmul_scalars", "type", "vbad = X @ X"),
    # undefined names
    ("undefined_name", "undefined", "vbad = undefined_name + 1"),
    ("tylo_unknown_fn", "undefined", "vbad = tylo.nonexistent(X)"),
    ("thread_idx_w", "undefined", "vbad = tylo.thread_idx.w"),
    ("method_on_scalar", "undefined", "vbad = X.foo()"),
    ("math_not_imported", "undefined", "vbad = math.sqrt(X)"),
    ("unknown_dtype", "undefined", "vbad = X.to(tylo.f128)"),
    # runtime values where compile-time ones are needed
    ("static_assert_runtime", "runtime_for_constexpr", "tylo.static_assert(I > 0)"),
    # (a runtime `assert` is valid: compiled away, or a device assertion under debug=True; docs/language.md)
    ("static_range_runtime", "runtime_for_constexpr", "for sbad in tylo.static_range(N):\n>pass"),
    ("shared_runtime_shape", "runtime_for_constexpr", "vbad = tylo.shared_array(tylo.f32, (N,))"),
    ("tuple_runtime_index", "runtime_for_constexpr", "vbad = (X, X)[N]"),
    ("printf_runtime_format", "runtime_for_constexpr", "tylo.printf(X)"),
    ("comprehension_runtime", "runtime_for_constexpr", "vbad = [X for ibad in range(N)]"),
    ("plain_function_runtime", "runtime_for_constexpr", "vbad = plain_py(X)"),
    ("shfl_runtime_width", "runtime_for_constexpr", "vbad = tylo.shfl_xor(X, 1, N)"),
    # out-of-range or failing compile-time constants
    ("int_too_large", "constant", "vbad = X + 10**400"),
    ("shift_literal_huge", "constant", "vbad = I + (1 << 200)"),
    ("log_negative", "constant", "vbad = tylo.log(-1.0)"),
    ("sqrt_negative", "constant", "vbad = tylo.sqrt(-4.0)"),
    ("divide_by_zero_ct", "constant", "vbad = X + 1 // 0"),
    ("modulo_by_zero_ct", "constant", "vbad = X + 5 % 0"),
    # bad casts
    ("to_int_literal", "cast", "vbad = X.to(5)"),
    ("to_string", "cast", "vbad = X.to('f32')"),
    ("to_pointer_type", "cast", "vbad = X.to(tylo.Ptr[tylo.f32])"),
    ("to_python_int", "cast", "vbad = tylo.cast(X, int)"),
    ("pointer_to_float", "cast", "vbad = P.to(tylo.f32)"),
    ("to_constexpr", "cast", "vbad = X.to(tylo.constexpr)"),
    # bad shapes for shared_array
    ("shared_zero", "shared_shape", "vbad = tylo.shared_array(tylo.f32, (0,))"),
    ("shared_negative", "shared_shape", "vbad = tylo.shared_array(tylo.f32, (-4,))"),
    ("shared_float", "shared_shape", "vbad = tylo.shared_array(tylo.f32, (2.5,))"),
    ("shared_string", "shared_shape", "vbad = tylo.shared_array(tylo.f32, 'abc')"),
    ("shared_nested", "shared_shape", "vbad = tylo.shared_array(tylo.f32, ((2, 3),))"),
    ("shared_align3", "shared_shape", "vbad = tylo.shared_array(tylo.f32, (4,), align=3)"),
    ("shared_huge", "shared_shape", "vbad = tylo.shared_array(tylo.f32, (1 << 40,))"),
    ("shared_bad_dtype", "shared_shape", "vbad = tylo.shared_array(5, (4,))"),
    ("shared_2d_index_1d", "shared_shape", "sbad = tylo.shared_array(tylo.f32, (4,))\nsbad[0, 0] = X@"),
    # misuse of constexpr
    ("constexpr_none_compare", "constexpr", "if Z > 1:\n>pass", {"Z": None}),
    ("constexpr_string_range", "constexpr", "for sbad in tylo.static_range(Z):\n>pass", {"Z": "abc"}),
    ("constexpr_list_arith", "constexpr", "vbad = X + Z", {"Z": [1, 2]}),
    ("constexpr_object", "constexpr", "vbad = X + Z", {"Z": object()}),
    ("constexpr_dict_arith", "constexpr", "vbad = X * Z", {"Z": {"a": 1}}),
    # unsupported syntax
    ("lambda", "syntax", "fbad = lambda a: a"),
    ("try", "syntax", "try:\n>pass\nexcept Exception:\n>pass"),
    ("with", "syntax", "with X:\n>pass"),
    ("global", "syntax", "global gbad"),
    ("import", "syntax", "import math"),
    ("del", "syntax", "del X"),
    ("raise", "syntax", "raise ValueError('no')"),
    ("walrus", "syntax", "vbad = (wbad := X)"),
    ("set_comprehension", "syntax", "vbad = {ibad for ibad in (1, 2)}"),
    ("dict_comprehension", "syntax", "vbad = {ibad: ibad for ibad in (1, 2)}"),
    ("class", "syntax", "class Cbad:\n>pass"),
    ("yield", "syntax", "yield X"),
    ("return_value", "syntax", "return X"),
    ("nested_def", "syntax", "def fbad(a):\n>return a"),
    ("starred_call", "syntax", "vbad = tylo.fma(*X)"),
    # control flow typing
    ("loop_type_change", "control_flow", "vbad = 0@\nfor ibad in range(N):@\n>vbad = 1.5@"),
    ("branch_only_definition", "control_flow", "if N > 0:@\n>vbad = X\nPX[0] = vbad@"),
    ("runtime_return_in_helper", "control_flow", "vbad = hbad(N)@"),
    ("while_type_change", "control_flow", "vbad = tylo.i32(0)@\nwhile vbad < N:@\n>vbad = vbad + 0.5@"),
]
HOST_MUTATIONS = [
    ("sig_bad_suffix", lambda s: s.replace(",", ":xyz,", 1)),
    ("sig_align8", lambda s: s.replace(",", ":8,", 1)),
    ("sig_empty_entry", lambda s: s.replace(",", ",,", 1)),
    ("sig_unknown_type", lambda s: "*f33, " + s.split(", ", 1)[1]),
    ("sig_double_star", lambda s: "*" + s),
    ("sig_trailing_comma", lambda s: s + ","),
    ("sig_extra_entry", lambda s: s + ", i32"),
    ("sig_missing_entry", lambda s: s.rsplit(", ", 1)[0]),
]
TEMPLATE_NAMES = [t[0] for t in TEMPLATES] + [h[0] for h in HOST_MUTATIONS]


def _pick(r, env, need):
    """A variable (name) for a placeholder, or None when the scope has none."""
    def of(pred):
        c = sorted(n for n, t in env.items() if pred(t))
        return r.choice(c) if c else None
    if need == "I":
        return of(lambda t: is_int(t))
    if need == "F":
        return of(lambda t: t in ("f16", "bf16", "f32"))
    if need == "D":
        return of(lambda t: t == "f64")
    if need == "B":
        return of(lambda t: t == "bool")
    if need == "X":
        return of(lambda t: t not in FP8_TYPES)
    if need == "Q":
        return of(lambda t: t in FP8_TYPES)
    raise AssertionError(need)


def _fill(r, text, env, outs):
    missing = []

    def sub(m):
        key = m.group(0)
        if key == "N":
            return "n"
        if key == "P":
            return r.choice(sorted(outs))
        if key == "PI":
            c = sorted(n for n, t in outs.items() if is_int(t))
            if not c:
                missing.append(key)
                return key
            return r.choice(c)
        if key == "PX":
            return r.choice(sorted(outs))
        v = _pick(r, env, key)
        if v is None:
            if key in ("F", "D", "X", "I", "B", "Q"):
                # make one: a typed constant of the wanted kind keeps the mutation meaningful
                return {"F": "tylo.f32(1.5)", "D": "tylo.f64(2.5)", "X": "tylo.i32(3)", "I": "tylo.i32(3)",
                        "B": "tylo.bool(1)", "Q": "tylo.f32(1.0).to(tylo.f8e4m3)"}[key]
        return v
    out = re.sub(r"\b(PI|PX|P|N|I|F|D|B|X|Q)\b", sub, text)
    return out, missing


def make_mutant(seed: int, template: str | None = None, base_statements: int | None = None) -> Mutant:
    """The invalid kernel of ``seed``: template chosen by the seed unless given. ``base_statements``
    keeps that many top-level statements of the base kernel before the mistake (default: only
    the loads for template-pinned cases; a seeded choice otherwise)."""
    r = random.Random(seed * 104729 + 17)
    name = template or r.choice(TEMPLATE_NAMES)
    case = generate(seed)
    lines = case.source.rstrip("\n").split("\n")
    def_idx = next(i for i, line in enumerate(lines) if line.startswith(f"def {case.kernel_name}("))
    body = case.body
    loads = sum(1 for st in body if st.kind == "assign" and st.a[1].kind == "load")
    if base_statements is None:
        base_statements = loads if template else r.randint(loads, len(body))
        if base_statements > loads and not _prefix_compiles(case, lines, def_idx, body[:base_statements]):
            base_statements = loads   # the base itself hits a bug: mutate only after the loads
    keep = [st for st in body[:base_statements] if st.kind != "return"]
    env = {}
    for p in case.params:
        if p.kind == "scalar":
            env[p.name] = p.ty
    for st in keep:
        if st.kind == "assign":
            env[st.a[0]] = st.a[1].ty
    outs = {p.name: p.ty for p in case.params if p.kind == "out"}
    signature, constexprs = case.signature, dict(case.constexprs)
    header = lines[:def_idx - 1]   # everything before "@tylo.jit"
    def_line = lines[def_idx]
    host = dict(HOST_MUTATIONS).get(name)
    if host is not None:
        signature = host(signature)
        kept = [ln for st in keep for ln in render_block([st], 1)]
        src = header + ["@tylo.jit", def_line] + kept + ["    pass"]
        return Mutant(seed, name, "signature", "\n".join(src) + "\n", case.kernel_name, signature, constexprs,
                      set(), host_error=True)
    spec = next(t for t in TEMPLATES if t[0] == name)
    _, category, text = spec[:3]
    extra_constexprs = spec[3] if len(spec) > 3 else {}
    filled, missing = _fill(r, text, env, outs)
    if missing:  # no integer output: store into a fresh one is impossible, use another template
        return make_mutant(seed, "float_index", base_statements)
    if extra_constexprs:
        def_line = def_line[:-2] + ", Z: tylo.constexpr):"
        constexprs.update(extra_constexprs)
    module_extra = []
    if "plain_py(" in filled:
        module_extra += PLAIN_FN
    if "hbad(" in filled:
        module_extra += BAD_HELPER
    src = header + module_extra + ["", "@tylo.jit", def_line]
    src += [ln for st in keep for ln in render_block([st], 1)]
    marks = set()
    for raw in filled.split("\n"):
        mark = raw.endswith("@")
        raw = raw.rstrip("@")
        ind = 2 if raw.startswith(">") else 1
        src.append("    " * ind + raw.lstrip(">"))
        if mark:
            marks.add(len(src))
    if not marks:
        marks.add(len(src) - len(filled.split("\n")) + 1)
    for i, ln in enumerate(src):
        if ln.endswith("# MARK") and name == "runtime_return_in_helper":
            marks.add(i + 1)
    return Mutant(seed, name, category, "\n".join(src) + "\n", case.kernel_name, signature, constexprs, marks)


def _prefix_compiles(case, lines, def_idx, keep) -> bool:
    """Whether the base kernel cut after ``keep`` passes the frontend (so that the mistake inserted
    after it is the first thing the compiler meets)."""
    import tempfile
    import warnings

    src = lines[:def_idx + 1] + [ln for st in keep for ln in render_block([st], 1)] + ["    pass"]
    folder = tempfile.mkdtemp(prefix="tylo-fuzz-prefix-")
    path = os.path.join(folder, f"fuzz_prefix_{case.seed}.py")
    with open(path, "w") as f:
        f.write("\n".join(src) + "\n")
    spec = importlib.util.spec_from_file_location(f"fuzz_prefix_{case.seed}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            spec.loader.exec_module(module)
            getattr(module, case.kernel_name).lower(signature=case.signature, constexprs=case.constexprs)
    except Exception:  # noqa: BLE001 - any failure: do not build on this prefix
        return False
    finally:
        shutil.rmtree(folder, ignore_errors=True)   # one folder per mutant: a long campaign made thousands
    return True


REPR_RE = re.compile(r"<[\w.]+ object at 0x|<class '|<function |<module '|<built-in |<bound method |"
                     r"object at 0x[0-9a-f]+>|<[\w.]+\.[A-Z]\w* ")


def message_problem(reason: str) -> str | None:
    """Why a CompileError's reason is not a sentence in words (None when it is)."""
    if REPR_RE.search(reason):
        return "the message holds a Python object repr"
    words = re.findall(r"[A-Za-z]{2,}", reason)
    if len(words) < 3:
        return "the message is not a sentence"
    return None


def load_mutant(m: Mutant, folder: str):
    return load_generated(m.source, f"fuzz_invalid_{m.seed}_{m.template}", m.kernel_name, folder)


def check_mutant(seed: int, folder: str, template: str | None = None, mutant: Mutant | None = None) -> dict:
    import tylo

    m = mutant or make_mutant(seed, template)
    result = {"seed": seed, "template": m.template, "category": m.category, "stage": f"{m.category}/{m.template}",
              "status": "ok",
              "lines": sorted(m.lines), "detail": ""}
    try:
        kernel, path = load_mutant(m, folder)
    except SyntaxError as exc:
        result.update(status="fuzzer_error", detail=f"mutant does not parse: {exc}")
        return result
    except Exception as exc:  # noqa: BLE001 - decorating the kernel failed: judge it like a compile
        kernel, path, early = None, None, exc
    else:
        early = None
    result["path"] = path
    try:
        if early is not None:
            raise early
        kernel.compile(signature=m.signature, arch="sm_90a", constexprs=m.constexprs, block=(1,))
    except tylo.CompileError as exc:
        if m.host_error:
            result.update(status="not_compile_error", detail=f"CompileError for a host mistake: {exc.reason}")
        elif "internal compiler error" in exc.reason:
            result.update(status="internal", detail=exc.reason)
        elif exc.lineno not in m.lines:
            result.update(status="wrong_line", detail=f"line {exc.lineno}, expected {sorted(m.lines)}: {exc.reason}")
        else:
            problem = message_problem(exc.reason)
            if problem:
                result.update(status="repr_message", detail=f"{problem}: {exc.reason}")
            else:
                result["detail"] = exc.reason
        return result
    except (ValueError, TypeError) as exc:
        if m.host_error and "internal" not in str(exc):
            result["detail"] = str(exc)
            return result
        result.update(status="not_compile_error", detail=f"{type(exc).__name__}: {exc}")
        return result
    except Exception as exc:  # noqa: BLE001
        result.update(status="not_compile_error", detail=f"{type(exc).__name__}: {exc}")
        return result
    result.update(status="no_error", detail="compiled without an error")
    return result
