"""Compile errors: exact file/line/column, the source line with a caret, and an actionable sentence."""
import inspect
import re

import bad_kernels as bk
import pytest

import tylo

SOURCE = inspect.getsourcefile(bk)
LINES = open(SOURCE).read().splitlines()


def line_of(tag):
    for i, line in enumerate(LINES, 1):
        if re.search(rf"# error: {tag}\b", line):
            return i
    raise AssertionError(tag)


def compile_error(kernel, signature, **constexprs) -> tylo.CompileError:
    with pytest.raises(tylo.CompileError) as info:
        kernel.compile(signature=signature, arch="sm_90a", constexprs=constexprs)
    return info.value


CASES = [
    ("unknown_name", "*f32", {}, "name 'undefined_thing' is not defined"),
    ("uses_class", "*f32", {}, "class definitions are not supported"),
    ("uses_try", "*f32", {}, "try statements are not supported"),
    ("uses_with", "*f32", {}, "with statements are not supported"),
    ("uses_lambda", "*f32", {}, "lambdas are not supported"),
    ("uses_generator", "*f32, i32", {}, "comprehensions over runtime values are not supported"),
    ("loop_type_change", "*f32, *f32, i32", {}, "changes type across the loop back-edge: i32 before the loop, f32"),
    ("float_into_int", "*i32, *f32", {}, "storing a f32 value into a *i32 pointer would truncate it"),
    ("one_branch_only", "*f32, i32", {}, "'v' is assigned in only one branch of the if"),
    ("loop_local", "*f32, i32", {}, "'w' is assigned only inside the runtime loop"),
    ("runtime_into_python", "*f32, *f32", {}, "plain_python is called with runtime values but is neither"),
    ("bad_static_assert", "*f32", {"N": 3}, "static_assert failed: N must be even"),
    ("bad_shuffle", "*f32, *f32", {}, "shuffle expects scalars, got *f32"),
    ("helper_with_error", "*f32, *f32", {}, "name 'missing_helper_name' is not defined"),
    ("float_atomic_max", "*f32, *f32", {}, "atomic_max is not available on f32"),
]


@pytest.mark.parametrize("tag,signature,constexprs,message", CASES, ids=[c[0] for c in CASES])
def test_error_location_and_message(tag, signature, constexprs, message):
    kernel = getattr(bk, tag if tag != "helper_with_error" else "calls_bad_helper")
    err = compile_error(kernel, signature, **constexprs)
    assert err.filename == SOURCE
    assert err.lineno == line_of(tag), str(err)
    assert message in err.reason, str(err)
    text = str(err)
    assert text.startswith(f"{SOURCE}:{err.lineno}:{err.col_offset + 1}: error: ")
    source_line = LINES[err.lineno - 1].strip()
    assert source_line in text and "^" in text  # the line and a caret under the column


def test_caret_points_at_column():
    err = compile_error(bk.unknown_name, "*f32")
    line = LINES[err.lineno - 1]
    assert line[err.col_offset:].startswith("undefined_thing")
    shown = str(err).splitlines()
    caret_line = shown[2]
    code_line = shown[1]
    assert code_line[caret_line.index("^"):].startswith("undefined_thing")


def test_bad_shuffle_is_a_type_error_not_a_crash():
    err = compile_error(bk.bad_shuffle, "*f32, *f32")
    assert "*f32" in err.reason  # names the offending type


def test_branch_type_mismatch_message():
    err = compile_error(bk.branch_type_mismatch, "*f32, *f32, i32")
    assert "has type f32 in the then-branch and i32 in the else-branch" in err.reason
    assert err.lineno == line_of("branch_type_mismatch")  # the if whose branches disagree


def test_helper_error_mentions_call_site():
    err = compile_error(bk.calls_bad_helper, "*f32, *f32")
    assert "inlined from" in err.reason


def test_wrong_signature_length_is_a_type_error():
    with pytest.raises(TypeError, match="runtime parameters"):
        bk.float_into_int.compile(signature="*i32", arch="sm_90a")


def test_unknown_arch():
    with pytest.raises(ValueError, match="unknown target"):
        bk.float_into_int.compile(signature="*i32, *f32", arch="sm_70")


def test_compile_error_is_picklable():
    import pickle
    err = compile_error(bk.unknown_name, "*f32")
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err) and again.lineno == err.lineno
