"""A small real kernel for the autotuner tests: its constexprs set the block's share of work and
its shared memory; a configuration whose buffer is smaller than the block does not compile."""
import tylo


@tylo.jit(arch="sm_90a")
def staged_scale(out, x, n, BLOCK: tylo.constexpr, SMEM: tylo.constexpr):
    """out[i] = 2 x[i], staged through a shared buffer of SMEM floats."""
    tylo.static_assert(SMEM >= BLOCK, "the shared buffer must hold one value per thread")
    buf = tylo.shared_array(tylo.f32, (SMEM,))
    t = tylo.thread_idx.x
    i = tylo.block_idx.x * BLOCK + t
    if i < n:
        buf[t] = x[i]
    tylo.sync_threads()
    if i < n:
        out[i] = buf[t] * 2.0


@tylo.jit(arch="sm_90a")
def add_one(x, n, BLOCK: tylo.constexpr):
    """x[i] += 1 in place: tuning runs must not leave their updates (restore_value)."""
    i = tylo.block_idx.x * BLOCK + tylo.thread_idx.x
    if i < n:
        x[i] = x[i] + 1.0


@tylo.jit(arch="sm_90a")
def atomic_total(total, x, n, BLOCK: tylo.constexpr):
    """total[0] += sum(x) with atomics: each tuning run must start from zero (reset_to_zero)."""
    i = tylo.block_idx.x * BLOCK + tylo.thread_idx.x
    if i < n:
        tylo.atomic_add(total, x[i])
