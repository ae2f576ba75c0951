"""User mistakes are CompileErrors in words at the user's line, never "internal compiler error" and never a
Python object's repr (issue 16 item 11; issue 15 items 3, 4 and 8)."""
import inspect
import re

import pytest
import user_error_kernels as uk

import tylo

SOURCE = inspect.getsourcefile(uk)
LINES = open(SOURCE).read().splitlines()


def line_of(tag):
    for i, line in enumerate(LINES, 1):
        if re.search(rf"# error: {tag}\b", line):
            return i
    raise AssertionError(tag)


CASES = [
    # (kernel, tag, signature, constexprs, block, words the message must contain)
    ("exp_two_args", "exp_two_args", "*f32, f32", {}, None, ["tylo.exp()", "too many positional arguments", "(x)"]),
    ("print_end", "print_end", "*f32, f32", {}, None, ["print()", "unexpected keyword argument 'end'"]),
    ("shfl_missing", "shfl_missing", "*f32, f32", {}, None, ["tylo.shfl_xor()", "'lane_mask'"]),
    ("exp_fast", "exp_fast", "*f32, i32", {}, None, ["tylo.exp()", "unexpected keyword argument 'fast'"]),
    ("shared_runtime_shape", "shared_runtime_shape", "*f32, i32", {}, None,
     ["shared_array shape must be positive compile-time integers", "a runtime i32", "constexpr"]),
    ("log_negative", "log_negative", "*f32, f32", {}, None, ["tylo.log(-1.0) failed at compile time",
                                                             "math domain error"]),
    ("compare_none", "compare_none", "*f32, f32", {"MODE": None}, None, ["NoneType None > int 1",
                                                                         "failed at compile time"]),
    ("huge_float_constant", "huge_float_constant", "*f32, f32", {}, None, ["integer constant", "(401 digits)",
                                                                           "too large for f32"]),
    ("huge_int_constant", "huge_int_constant", "*i32, i32", {}, None, ["integer constant",
                                                                       "does not fit in 64 bits"]),
    ("static_range_runtime", "static_range_runtime", "*f32, i32", {}, None,
     ["tylo.static_range takes compile-time arguments only", "a runtime i32", "use range(...)"]),
    ("negate_none", "negate_none", "*f32, f32", {"MODE": None}, None, ["-NoneType None failed at compile time"]),
    ("to_two_args", "to_two_args", "*f32, f32", {}, None, ["to()", "too many positional arguments"]),
    ("ownership_wider_than_block", "ownership_wider_than_block", "*f32, *f32", {}, 32,
     ["striped(4x128, axis=1, lanes=32)", "128 threads", "the block has only 32"]),
    ("float_fragment_into_int_tile", "float_fragment_into_int_tile", "*i32, *f32", {}, 32,
     ["storing a fragment of f32 into a tile of i32 would truncate it", ".astype(tylo.i32)"]),
    ("float_fragment_into_int_tile_bounded", "float_fragment_bounded", "*i32, *f32, i32", {}, 32,
     ["store_bounded: storing a fragment of f32 into a tile of i32 would truncate it"]),
    # a builtin's message that formats a runtime value with repr() reads "a runtime *f32 (out)"
    ("store_scalar_through_tile_api", "store_scalar_through_tile_api", "*f32, f32", {}, None,
     ["store needs a tile and a fragment", "a runtime *f32 (out)"]),
    ("print_pointer", "print_pointer", "*f32, f32", {}, None, ["print() in a kernel prints scalars", "*f32"]),
    ("call_an_int", "call_an_int", "*f32, f32", {}, None, ["int 3 is not callable"]),
]


@pytest.mark.parametrize("name,tag,signature,constexprs,block,words", CASES, ids=[c[0] for c in CASES])
def test_user_mistake_is_a_compile_error_in_words(name, tag, signature, constexprs, block, words):
    with pytest.raises(tylo.CompileError) as info:
        getattr(uk, name).compile(signature=signature, arch="sm_90a", constexprs=constexprs, block=block)
    err = info.value
    assert err.filename == SOURCE and err.lineno == line_of(tag), str(err)
    assert "internal compiler error" not in err.reason, err.reason
    assert not re.search(r"<[\w.]+ object at 0x", err.reason) and "<Value" not in err.reason, err.reason
    for w in words:
        assert w in err.reason, err.reason


def test_ownership_that_fits_the_block_compiles():
    uk.ownership_wider_than_block.compile(signature="*f32, *f32", arch="sm_90a", block=128)


def test_int_fragment_into_float_tile_still_converts():
    uk.int_fragment_into_float_tile.compile(signature="*f32, *i32", arch="sm_90a", block=32)
