"""Kernels with user mistakes that used to be reported as internal compiler errors (issue 16 item 11,
issue 15 items 3, 4 and 8). Each error line is marked; tests/frontend/test_user_errors.py compiles them."""
import tylo
from tylo import Layout, Ownership


@tylo.jit
def exp_two_args(out, x):
    out[0] = tylo.exp(x, x)  # error: exp_two_args


@tylo.jit
def print_end(out, x):
    print(x, end='')  # error: print_end


@tylo.jit
def shfl_missing(out, x):
    out[0] = tylo.shfl_xor(1.5)  # error: shfl_missing


@tylo.jit
def exp_fast(out, n):
    out[0] = tylo.exp(n, fast=True)  # error: exp_fast


@tylo.jit
def shared_runtime_shape(out, n):
    s = tylo.shared_array(tylo.f32, (n, 4))  # error: shared_runtime_shape
    s[0, 0] = 1.0


@tylo.jit
def log_negative(out, x):
    out[0] = tylo.log(-1.0)  # error: log_negative


@tylo.jit
def compare_none(out, x, MODE: tylo.constexpr):
    if MODE > 1:  # error: compare_none
        out[0] = x


@tylo.jit
def huge_float_constant(out, x):
    out[0] = x + 10**400  # error: huge_float_constant


@tylo.jit
def huge_int_constant(out, n):
    out[0] = n + 10**30  # error: huge_int_constant


@tylo.jit
def static_range_runtime(out, n):
    for i in tylo.static_range(n):  # error: static_range_runtime
        out[i] = 1.0


@tylo.jit
def negate_none(out, x, MODE: tylo.constexpr):
    out[0] = -MODE  # error: negate_none


@tylo.jit
def to_two_args(out, x):
    out[0] = x.to(tylo.f32, 3)  # error: to_two_args


@tylo.jit
def ownership_wider_than_block(out, x):
    own = Ownership.striped((4, 128), axis=1)
    f = tylo.load(tylo.GlobalTile(x, Layout((4, 128), (128, 1))), own)  # error: ownership_wider_than_block
    tylo.store(tylo.GlobalTile(out, Layout((4, 128), (128, 1))), f)


@tylo.jit
def float_fragment_into_int_tile(out, x):
    own = Ownership.local((32, 8), axis=1)
    f = tylo.load(tylo.GlobalTile(x, Layout((32, 8), (8, 1))), own)
    tylo.store(tylo.GlobalTile(out, Layout((32, 8), (8, 1))), f * 0.5)  # error: float_fragment_into_int_tile


@tylo.jit
def float_fragment_into_int_tile_bounded(out, x, n):
    own = Ownership.local((32, 8), axis=1)
    f = tylo.load(tylo.GlobalTile(x, Layout((32, 8), (8, 1))), own)
    tylo.store_bounded(tylo.GlobalTile(out, Layout((32, 8), (8, 1))), f, (n, 8))  # error: float_fragment_bounded


@tylo.jit
def int_fragment_into_float_tile(out, x):
    own = Ownership.local((32, 8), axis=1)
    f = tylo.load(tylo.GlobalTile(x, Layout((32, 8), (8, 1))), own)
    tylo.store(tylo.GlobalTile(out, Layout((32, 8), (8, 1))), f)


@tylo.jit
def store_scalar_through_tile_api(out, x):
    tylo.store(out, x)  # error: store_scalar_through_tile_api


@tylo.jit
def print_pointer(out, x):
    print(out)  # error: print_pointer


@tylo.jit
def call_an_int(out, x):
    three = 3
    out[0] = three(x)  # error: call_an_int
