"""Kernels that must not compile. The line marked ``# error: <tag>`` is where each error must point."""
import tylo


@tylo.jit
def unknown_name(out):
    out[0] = undefined_thing  # error: unknown_name  # noqa: F821


@tylo.jit
def uses_class(out):
    class A:  # error: uses_class
        pass


@tylo.jit
def uses_try(out):
    try:  # error: uses_try
        out[0] = 1.0
    except Exception:
        pass


@tylo.jit
def uses_with(out):
    with open("x"):  # error: uses_with
        pass


@tylo.jit
def uses_lambda(out):
    f = lambda v: v  # error: uses_lambda  # noqa: E731
    out[0] = f(1.0)


@tylo.jit
def uses_generator(out, n):
    out[0] = sum(out[i] for i in range(n))  # error: uses_generator


@tylo.jit
def branch_type_mismatch(out, x, n):
    if n > 0:  # error: branch_type_mismatch
        v = x[0]
    else:
        v = n
    out[0] = v  # unreachable: the if above fails first


@tylo.jit
def loop_type_change(out, x, n):
    acc = 0
    for i in range(n):  # error: loop_type_change
        acc = acc + x[i]
    out[0] = acc


@tylo.jit
def float_into_int(out, x):
    out[0] = x[0]  # error: float_into_int


@tylo.jit
def one_branch_only(out, n):
    if n > 0:
        v = 1.0
    out[0] = v  # error: one_branch_only


@tylo.jit
def loop_local(out, n):
    for i in range(n):
        w = 2.0
    out[0] = w  # error: loop_local


def plain_python(v):
    return v * 2


@tylo.jit
def runtime_into_python(out, x):
    out[0] = plain_python(x[0])  # error: runtime_into_python


@tylo.jit
def bad_static_assert(out, N: tylo.constexpr):
    tylo.static_assert(N % 2 == 0, "N must be even")  # error: bad_static_assert


@tylo.jit
def bad_shuffle(out, x):
    out[0] = tylo.shfl_xor(x, 1)  # error: bad_shuffle


@tylo.func
def helper_with_error(v):
    return v + missing_helper_name  # error: helper_with_error  # noqa: F821


@tylo.jit
def calls_bad_helper(out, x):
    out[0] = helper_with_error(x[0])


@tylo.jit
def float_atomic_max(out, x):
    tylo.atomic_max(out, x[0])  # error: float_atomic_max
