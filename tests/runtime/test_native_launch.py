"""The native launcher (tylo/runtime/native_launch.c) on a machine without a GPU.

The extension is built here into a temporary folder with this machine's C compiler (as tylo does on
first use), and its launch functions are pointed at a recording stand-in for cuLaunchKernel /
cuLaunchKernelEx compiled here too: every parameter kind must reach the "driver" as the same bytes
the ctypes path packs, the C dispatch of ``kernel[grid, block](...)`` must compute the same
specialisation keys as the Python path, and errors must be those of the Python path.
"""
import ctypes
import math
import shutil
import struct
import subprocess
import threading
import warnings

import pytest

import tylo
from tylo.runtime import native
from tylo.runtime.arrays import DeviceArray
from tylo.runtime.errors import CudaError
from tylo.runtime.launch import ArgPacker, Launcher

pytestmark = pytest.mark.skipif(shutil.which(native.compiler_command()[0]) is None, reason="no C compiler")

RECORDER_C = r"""
#include <string.h>
static unsigned char params_rec[8192];
static unsigned long sizes[256];
static int nsizes, result, calls;
static unsigned dims_rec[7];
static unsigned long long stream_rec, function_rec;
static unsigned char config_rec[56 + 2 * 72];

void rec_layout(int n, const unsigned long *s) { nsizes = n; memcpy(sizes, s, n * sizeof *s); }
void rec_result(int r) { result = r; }
int rec_calls(void) { return calls; }
const unsigned char *rec_params(void) { return params_rec; }
const unsigned *rec_dims(void) { return dims_rec; }
unsigned long long rec_stream(void) { return stream_rec; }
unsigned long long rec_function(void) { return function_rec; }
const unsigned char *rec_config(void) { return config_rec; }

static void copy_params(void **params) {
    unsigned long off = 0;
    for (int i = 0; i < nsizes; i++) { memcpy(params_rec + off, params[i], sizes[i]); off += sizes[i]; }
}

int rec_launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
               unsigned shared, void *stream, void **params, void **extra) {
    calls++;
    unsigned d[7] = {gx, gy, gz, bx, by, bz, shared};
    memcpy(dims_rec, d, sizeof d);
    stream_rec = (unsigned long long)stream;
    function_rec = (unsigned long long)f;
    copy_params(params);
    return result;
}

int rec_launch_ex(const void *config, void *f, void **params, void **extra) {
    calls++;
    memset(config_rec, 0, sizeof config_rec);
    memcpy(config_rec, config, 56);
    void *attrs = *(void **)((const char *)config + 40);
    unsigned num_attrs = *(const unsigned *)((const char *)config + 48);
    if (attrs && num_attrs <= 2) memcpy(config_rec + 56, attrs, 72 * num_attrs);
    memcpy(dims_rec, config, sizeof dims_rec);             /* grid, block, shared: as cuLaunchKernel's */
    memcpy(&stream_rec, (const char *)config + 32, 8);
    function_rec = (unsigned long long)f;
    copy_params(params);
    return result;
}
"""


@pytest.fixture(scope="module")
def mod(tmp_path_factory):
    """The native module, built from this tree's source into a temporary folder."""
    return native.load_file(native.build(tmp_path_factory.mktemp("native")))


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    folder = tmp_path_factory.mktemp("recorder")
    src, lib = folder / "rec.c", folder / "rec.so"
    src.write_text(RECORDER_C)
    subprocess.run([*native.compiler_command(), "-O2", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    r = ctypes.CDLL(str(lib))
    for name in ("rec_params", "rec_dims", "rec_config"):
        getattr(r, name).restype = ctypes.c_void_p
    r.rec_stream.restype = r.rec_function.restype = ctypes.c_ulonglong
    r.rec_result(0)
    return r


def addresses(rec):
    return (ctypes.cast(rec.rec_launch, ctypes.c_void_p).value, ctypes.cast(rec.rec_launch_ex, ctypes.c_void_p).value)


def fake_slow(param_ctypes, rec=None, names=None, function=0xF00D, shared=0, programmatic=False):
    """A ctypes Launcher whose driver entry points are the recorder (no libcuda needed)."""
    slow = Launcher.__new__(Launcher)
    ArgPacker.__init__(slow, param_ctypes, names, programmatic)
    slow.function, slow.shared_bytes, slow._ctx = function, shared, None
    slow._owner, slow._clones, slow._clone_lock = threading.get_ident(), {}, threading.Lock()
    if rec is not None:
        vp = ctypes.c_void_p
        slow._cu_launch = rec.rec_launch
        slow._cu_launch.argtypes = [vp] + [ctypes.c_uint] * 7 + [vp, vp, vp]
        slow._cu_launch.restype = ctypes.c_int
        slow._cu_launch_ex = rec.rec_launch_ex
        slow._cu_launch_ex.argtypes = [vp, vp, vp, vp]
        slow._cu_launch_ex.restype = ctypes.c_int
    return slow


def native_for(mod, rec, slow):
    launch, launch_ex = addresses(rec) if rec is not None else (0, 0)
    return mod.Launcher(slow.function, launch, launch_ex, slow.slots, slow.param_bytes, slow.shared_bytes, slow)


def recorded_params(rec, slow):
    """The parameter bytes the recorder saw, laid out again at the packer's offsets."""
    sizes = [s for _, _, s in slow.slots]
    raw = ctypes.string_at(rec.rec_params(), sum(sizes))
    out = bytearray(slow.param_bytes)
    pos = 0
    for (_, off, size) in slow.slots:
        out[off:off + size] = raw[pos:pos + size]
        pos += size
    return bytes(out)


def forget_layout(rec):
    """Record no parameters (until set_layout): the next kernel may have fewer than the last."""
    rec.rec_layout(0, (ctypes.c_ulong * 1)())


def set_layout(rec, slow):
    sizes = [s for _, _, s in slow.slots]
    rec.rec_layout(len(sizes), (ctypes.c_ulong * max(len(sizes), 1))(*sizes))


# every parameter kind the JIT passes (pointers, signed and unsigned ints of each width, f32, f64,
# bool as u8, a 128-byte TMA descriptor), then ctypes.c_bool and an i32 after the blob (alignment)
KINDS = [ctypes.c_uint64, ctypes.c_int8, ctypes.c_int16, ctypes.c_int32, ctypes.c_int64, ctypes.c_uint8,
         ctypes.c_uint16, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_float, ctypes.c_double, ctypes.c_uint8,
         ctypes.c_uint8 * 128, ctypes.c_bool, ctypes.c_int32, ctypes.c_uint16]

VALUE_SETS = [
    (0x7F00_0000_1000, -128, -32768, -2**31, -2**63, 0, 0, 0, 0, -0.0, -1e-310, 0, bytes(128), False, -1, 0),
    (2**64 - 1, 127, 32767, 2**31 - 1, 2**63 - 1, 255, 65535, 2**32 - 1, 2**64 - 1, 3.4e38, 1.7e308, 1,
     bytes(range(128)), True, 2**31 - 1, 0x3F80),
    (16, -1, 7, 1000, -5, 17, 300, 123456, 99, 1.0 / 3.0, math.pi, True, bytearray(b"\xab" * 128), 1, 42, 7),
    (0, 0, 0, 0, 0, 0, 0, 0, 0, float("inf"), float("nan"), 0, bytes(128), 0, 0, 0),
    (1, 1, 1, True, 1, 1, 1, 1, 1, 2, 3, 1, bytes(128), 2, False, 1),   # ints for floats, bools for ints
]


@pytest.mark.parametrize("values", VALUE_SETS)
def test_pack_is_byte_identical_to_the_ctypes_path(mod, values):
    packer = ArgPacker(KINDS)
    packer.pack(values)
    assert mod.Launcher(0, 0, 0, packer.slots, packer.param_bytes, 0, packer).pack(values) == packer.param_buffer()


def test_pack_numpy_scalars_like_struct(mod):
    np = pytest.importorskip("numpy")
    kinds = [ctypes.c_int32, ctypes.c_uint64, ctypes.c_float, ctypes.c_double]
    values = (np.int32(-7), np.uint64(2**63), np.float32(1.25), np.float64(-2.5))
    packer = ArgPacker(kinds)
    packer.pack(values)
    assert mod.Launcher(0, 0, 0, packer.slots, packer.param_bytes, 0, packer).pack(values) == packer.param_buffer()


BAD = [
    ((2**31, 0, 1.0, bytes(128)), ValueError),       # i32 out of range
    ((1, -1, 1.0, bytes(128)), ValueError),          # pointer negative
    ((1.5, 0, 1.0, bytes(128)), TypeError),          # float for an int
    ((1, 0, "x", bytes(128)), TypeError),            # str for a float
    ((1, 0, 1e300, bytes(128)), TypeError),          # f32 overflow (struct: OverflowError -> TypeError)
    ((1, 0, 1.0, bytes(64)), TypeError),             # short descriptor
    ((1, 0, 1.0, "x" * 128), TypeError),             # not bytes
    ((1, 0, 1.0), TypeError),                        # one value missing
]


@pytest.mark.parametrize("values,exc", BAD)
def test_bad_values_raise_the_python_paths_error(mod, values, exc):
    kinds = [ctypes.c_int32, ctypes.c_uint64, ctypes.c_float, ctypes.c_uint8 * 128]
    packer = ArgPacker(kinds, names=["n", "ptr", "scale", "desc"])
    with pytest.raises(exc) as want:
        packer.pack(values)
    fast = mod.Launcher(0, 0, 0, packer.slots, packer.param_bytes, 0, packer)
    with pytest.raises(exc) as got:
        fast.pack(values)
    assert str(got.value) == str(want.value)


def test_launch_hands_the_driver_grid_block_stream_and_parameters(mod, rec):
    slow = fake_slow(KINDS, rec, function=0xF00D_0000_0001, shared=4096)
    fast = native_for(mod, rec, slow)
    set_layout(rec, slow)
    values = VALUE_SETS[2]
    fast.launch(3, 2, 1, 128, 2, 1, 0xABCD_0000_0000, values)
    slow.pack(values)
    assert recorded_params(rec, slow) == slow.param_buffer()
    assert list((ctypes.c_uint * 7).from_address(rec.rec_dims())) == [3, 2, 1, 128, 2, 1, 4096]
    assert rec.rec_stream() == 0xABCD_0000_0000 and rec.rec_function() == 0xF00D_0000_0001


def test_cluster_launch_builds_the_config_of_the_ctypes_path(mod, rec):
    slow = fake_slow(KINDS, rec, shared=1024)
    fast = native_for(mod, rec, slow)
    set_layout(rec, slow)
    values = VALUE_SETS[1]
    fast.launch_cluster((4, 2, 1), (256, 1, 1), (2, 1, 1), 7, values)
    native_config = ctypes.string_at(rec.rec_config(), 56 + 72)
    native_params = recorded_params(rec, slow)
    slow.launch_cluster((4, 2, 1), (256, 1, 1), (2, 1, 1), 7, values)
    ctypes_config = ctypes.string_at(rec.rec_config(), 56 + 72)
    assert native_params == recorded_params(rec, slow)
    # the attrs pointer (bytes 40..48) differs (stack vs buffer); everything else is the same
    assert native_config[:40] == ctypes_config[:40] and native_config[48:] == ctypes_config[48:]
    assert struct.unpack_from("<7I", native_config) == (4, 2, 1, 256, 1, 1, 1024)
    assert struct.unpack_from("<I", native_config, 56)[0] == 4          # CLUSTER_DIMENSION
    assert struct.unpack_from("<3I", native_config, 64) == (2, 1, 1)
    with pytest.raises(ValueError, match="cluster"):
        fast.launch_cluster((4, 2, 1), (256, 1, 1), (0, 1, 1), 7, values)


@pytest.mark.parametrize("cluster", [None, (2, 1, 1)])
def test_programmatic_launches_carry_the_attribute_on_both_paths(mod, rec, cluster):
    """A kernel that waits on the grids before it (``programmatic``) launches through cuLaunchKernelEx with
    programmatic stream serialization allowed (attribute 6, value 1), after the cluster's attribute if any."""
    slow = fake_slow(KINDS, rec, shared=2048, programmatic=True)
    fast = native_for(mod, rec, slow)
    set_layout(rec, slow)
    values = VALUE_SETS[2]
    configs, params = [], []
    for launcher in (fast, slow):
        before = rec.rec_calls()
        if cluster is None:
            launcher.launch(5, 1, 1, 128, 1, 1, 9, values)
        else:
            launcher.launch_cluster((4, 1, 1), (128, 1, 1), cluster, 9, values)
        assert rec.rec_calls() == before + 1
        configs.append(ctypes.string_at(rec.rec_config(), 56 + 2 * 72))
        params.append(recorded_params(rec, slow))
    assert params[0] == params[1]
    native_config, ctypes_config = configs
    attrs = 2 if cluster else 1
    assert struct.unpack_from("<I", native_config, 48)[0] == attrs
    assert native_config[:40] == ctypes_config[:40] and native_config[48:] == ctypes_config[48:]
    pdl = 56 + 72 * (attrs - 1)
    assert struct.unpack_from("<Ii", native_config, pdl)[0] == 6
    assert struct.unpack_from("<i", native_config, pdl + 8)[0] == 1
    if cluster:
        assert struct.unpack_from("<I4x3I", native_config, 56) == (4, 2, 1, 1)


def test_cuda_errors_are_cuda_errors_and_no_context_retries_once(mod, rec):
    slow = fake_slow([ctypes.c_int32], rec)
    fast = native_for(mod, rec, slow)
    set_layout(rec, slow)
    rec.rec_result(1)
    try:
        with pytest.raises(CudaError) as e:
            fast.launch(1, 1, 1, 1, 1, 1, 0, (5,))
        assert e.value.code == 1 and "cuLaunchKernel" in str(e.value)
        rec.rec_result(201)   # CUDA_ERROR_INVALID_CONTEXT: make the context current, retry once
        made_current = []

        def make_current():
            made_current.append(1)
            rec.rec_result(0)
            return True
        slow._make_context_current = make_current
        before = rec.rec_calls()
        fast.launch(1, 1, 1, 1, 1, 1, 0, (5,))
        assert made_current == [1] and rec.rec_calls() == before + 2
        rec.rec_result(201)
        slow._make_context_current = lambda: True   # still no context after the retry: the error
        with pytest.raises(CudaError) as e:
            fast.launch(1, 1, 1, 1, 1, 1, 0, (5,))
        assert e.value.code == 201
    finally:
        rec.rec_result(0)


def test_bad_launch_geometry_is_a_value_error(mod, rec):
    slow = fake_slow([ctypes.c_int32], rec)
    fast = native_for(mod, rec, slow)
    with pytest.raises(ValueError, match="grid x"):
        fast.launch(-1, 1, 1, 1, 1, 1, 0, (5,))
    with pytest.raises(ValueError, match="stream"):
        fast.launch(1, 1, 1, 1, 1, 1, -2, (5,))


# ------------------------------------------------------------------ the C dispatch of kernel[grid, block]

SCALE = 2.0


def saxpy(out, x, n, a, flag, c: tylo.constexpr):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n and flag:
        out[i] = x[i] * a * SCALE + c


def typed(out: tylo.Ptr[tylo.f32], x, n: tylo.i32, a: tylo.f64, h: tylo.f16, b: tylo.bool_):
    i = tylo.thread_idx.x
    if i < n and b:
        out[i] = x[i] * a + h


class Blob:
    """A by-value 128-byte parameter (as a TMA binding is); ``frozen`` types are memoised per object."""

    def __init__(self, plan, seed):
        self.plan = plan
        self.data = bytes((seed * 7 + i) % 256 for i in range(128))

    def __tylo_param__(self):
        return ("tma", self.plan, 2, self.data)


class FrozenBlob(Blob):
    __tylo_param_frozen__ = True


def blobbed(d, out, n, K: tylo.constexpr):
    i = tylo.thread_idx.x
    if i < n:
        out[i] = 1.0


def device_array(ptr, dtype="f32"):
    a = DeviceArray.__new__(DeviceArray)
    a.ptr, a.dtype_name = ptr, dtype
    return a


class Harness:
    """A kernel whose launchers record instead of launching: native (C Bound) or Python (ctypes)."""

    def __init__(self, fn, mod, rec, monkeypatch, use_native):
        self.rec, self.mod = rec, mod
        forget_layout(rec)
        monkeypatch.setattr(native, "_state", {"module": mod if use_native else None, "why": "test"})
        self.kernel = tylo.jit(arch="sm_80")(fn)
        self.slow_calls = 0
        inner = self.kernel._launch

        def counting(*a):
            self.slow_calls += 1
            return inner(*a)
        self.kernel._launch = counting   # what the Dispatcher calls on its slow path
        self.records = []

        def launcher(ck):
            if ck._launcher is None:
                slow = fake_slow(ck.param_ctypes, rec, function=0xF00D)
                ck._launcher = native_for(mod, rec, slow) if use_native else slow
                ck._launcher_slow = slow
            return ck._launcher
        monkeypatch.setattr(tylo.CompiledKernel, "launcher", property(launcher))

    def key_of(self, block, args):
        k = self.kernel
        return tuple([block] + [k._classifiers[i][1](v)[0] for i, v in enumerate(args)])


def run_sequence(fn, calls, mod, rec, monkeypatch, use_native):
    h = Harness(fn, mod, rec, monkeypatch, use_native)
    keys = []
    for grid, block, args, kwargs in calls:
        forget_layout(rec)
        before = h.rec.rec_calls()
        h.kernel[grid, block](*args, **kwargs)
        assert h.rec.rec_calls() == before + 1
        key = h.key_of(block, args)
        keys.append(key)
        launcher = h.kernel._launchers[key]
        slow = getattr(launcher, "slow", launcher)
        set_layout(h.rec, slow)
        h.kernel[grid, block](*args, **kwargs)
        h.records.append((key, recorded_params(h.rec, slow), h.rec.rec_stream(),
                          list((ctypes.c_uint * 7).from_address(h.rec.rec_dims()))))
    return h, keys


def saxpy_calls():
    out, x = device_array(0x7F00_0000_0000), device_array(0x7F00_0000_1008)
    return [
        ((4, 1, 1), (128, 1, 1), (out, x, 1000, 1.5, True, 3), {}),
        ((4, 1, 1), (128, 1, 1), (out, x, 1000, 1.5, True, 3), {}),          # a hit
        ((8, 1, 1), (128, 1, 1), (out, x, 1, 2.5, False, 3), {}),            # n == 1: another key
        ((8, 1, 1), (128, 1, 1), (out, x, 17, -2.0, 1 == 1, 3), {"stream": 5}),
        ((8, 1, 1), (64, 1, 1), (out, x, 17, -2.0, True, 3), {}),            # another block
        ((8, 1, 1), (64, 1, 1), (out, x, 3 * 2**31, -2.0, True, 3), {}),     # i64 n
        ((8, 1, 1), (64, 1, 1), (out, x, 32, 0.5, True, 4.0), {}),           # constexpr of another type
        ((8, 1, 1), (64, 1, 1), (x, out, 32, 0.5, True, 4), {"stream": None}),  # unaligned out (x: 8 mod 16)
        ((8, 1, 1), (64, 1, 1), (out, device_array(0x7F00_0000_2000, "f16"), 32, 0.5, True, 4), {}),
    ]


def test_dispatch_keys_and_bytes_equal_the_python_path(mod, rec, monkeypatch):
    """The same launches through the C Bound and through the Python _Bound: the same keys (so the
    same compiled variants), the same parameter bytes, grid, block, shared bytes and stream."""
    calls = saxpy_calls()
    fast, fast_keys = run_sequence(saxpy, calls, mod, rec, monkeypatch, use_native=True)
    assert type(fast.kernel[(4, 1, 1), (128, 1, 1)]).__name__ == "Bound"
    py, py_keys = run_sequence(saxpy, calls, mod, rec, monkeypatch, use_native=False)
    assert type(py.kernel[(4, 1, 1), (128, 1, 1)]).__name__ == "_Bound"
    assert fast_keys == py_keys
    # the key format itself, unchanged: block, then per argument its classification
    assert fast_keys[0] == ((128, 1, 1), ("*f32", True), ("*f32", False), ("i32", False, False), ("f32",),
                            ("bool",), ("c", 3))
    assert fast_keys[2][3] == ("i32", True, False) and fast_keys[5][3] == ("i64", False, True)
    assert set(fast.kernel._launchers) == set(py.kernel._launchers) == set(py_keys)
    assert fast.records == py.records
    # every call ran twice; a hit stays in C: only first sightings of a type, misses and stream=
    # objects take the Python path
    assert fast.slow_calls < len(calls)


def test_hits_do_not_run_the_python_path(mod, rec, monkeypatch):
    h = Harness(saxpy, mod, rec, monkeypatch, use_native=True)
    out, x = device_array(0x7F00_0000_0000), device_array(0x7F00_0000_1000)
    launch = h.kernel[(4, 1, 1), (128, 1, 1)]
    launch(out, x, 100, 1.5, True, 3)
    first = h.slow_calls
    for n in (100, 200, 300, 404):        # the same key (i32, not 1, not a multiple of 16)
        launch(out, x, n, 2.5, False, 3, stream=9)
    launch(out, x, 48, 1.0, True, 3)
    assert h.slow_calls == first + 1       # only the n % 16 == 0 key was new
    assert rec.rec_stream() == 0


@pytest.mark.parametrize("use_native", [True, False], ids=["c-bound", "python-bound"])
def test_cluster_subscript_launches_through_launch_ex(mod, rec, monkeypatch, use_native):
    """``kernel[grid, block, cluster]``: cluster launches (cuLaunchKernelEx with the cluster attribute) on
    the fast path, in C where the native launcher is loaded (a hit runs no Python), as ``kernel.launch(...,
    cluster=)`` does; the plain subscript stays a cuLaunchKernel."""
    h = Harness(saxpy, mod, rec, monkeypatch, use_native=use_native)
    out, x = device_array(0x7F00_0000_0000), device_array(0x7F00_0000_1000)
    launch = h.kernel[4, 128, (2, 1)]
    assert type(launch).__name__ == ("Bound" if use_native else "_Bound") and launch.cluster == (2, 1, 1)
    assert h.kernel[4, 128, None].cluster is None
    args = (out, x, 100, 1.5, True, 3)
    launch(*args)                                   # the first call compiles through the Python path
    first = h.slow_calls
    slow = h.kernel._launchers[h.key_of((128, 1, 1), args)]
    slow = getattr(slow, "slow", slow)
    set_layout(rec, slow)
    before = rec.rec_calls()
    launch(out, x, 200, 2.5, False, 3, stream=7)
    assert rec.rec_calls() == before + 1
    if use_native:
        assert h.slow_calls == first                # a hit stays in C
    config = ctypes.string_at(rec.rec_config(), 56 + 72)
    assert struct.unpack_from("<7I", config) == (4, 1, 1, 128, 1, 1, 0) and rec.rec_stream() == 7
    assert struct.unpack_from("<I", config, 56)[0] == 4          # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    assert struct.unpack_from("<3I", config, 64) == (2, 1, 1)
    slow.pack((out.ptr, x.ptr, 200, 2.5, False))
    assert recorded_params(rec, slow) == slow.param_buffer()
    # the full form and the subscript record the same configuration
    h.kernel.launch(out, x, 200, 2.5, False, 3, grid=4, block=128, cluster=2, stream=7)
    assert ctypes.string_at(rec.rec_config(), 56 + 72)[48:] == config[48:]
    with pytest.raises(ValueError, match="cluster"):
        h.kernel[4, 128, (0, 1, 1)]
    with pytest.raises(TypeError, match=r"\[grid, block, cluster\]"):
        h.kernel[4, 128, 2, 1]


def test_annotated_parameters_and_errors_name_the_argument(mod, rec, monkeypatch):
    h = Harness(typed, mod, rec, monkeypatch, use_native=True)
    out, x = device_array(0x7F00_0000_0000), device_array(0x7F00_0000_1000)
    launch = h.kernel[1, 32]
    launch(out, x, 10, 0.5, 1.5, True)
    launch(out, x, 11, 2, 0.25, 0)
    with pytest.raises(TypeError, match="'n' = 1099511627776 does not fit in i32"):
        launch(out, x, 2**40, 0.5, 1.5, True)
    with pytest.raises(TypeError, match="'out' is annotated Ptr\\[f32\\] but the array holds f16"):
        launch(device_array(0x7F00_0000_0000, "f16"), x, 10, 0.5, 1.5, True)
    with pytest.raises(TypeError, match="argument 'x' is a builtins.str"):
        launch(out, "x", 10, 0.5, 1.5, True)
    with pytest.raises(TypeError, match="'n' is annotated i32 but got the float"):
        launch(out, x, 1.5, 0.5, 1.5, True)
    with pytest.raises(TypeError, match="missing argument 'a'"):
        launch(out, x, 10)
    with pytest.raises(TypeError, match="stream must be"):
        launch(out, x, 10, 0.5, 1.5, True, stream="s")
    launch(out, x, 12, 0.5, 1.5, True)     # still launches after the errors


def test_blobs_memoised_only_when_frozen(mod, rec, monkeypatch):
    from tylo.lang import tma
    plan = tma.TMATile(tylo.bf16, (128, 64))
    for cls in (Blob, FrozenBlob):
        calls = [((2, 1, 1), (32, 1, 1), (cls(plan, s), device_array(0x7F00_0000_0000), 64, 2), {})
                 for s in (1, 1, 2)]
        fast, fast_keys = run_sequence(blobbed, calls, mod, rec, monkeypatch, use_native=True)
        py, py_keys = run_sequence(blobbed, calls, mod, rec, monkeypatch, use_native=False)
        assert fast_keys == py_keys and fast.records == py.records
        b = cls(plan, 3)
        forget_layout(rec)
        launch = fast.kernel[2, 32]
        launch(b, device_array(0x7F00_0000_0000), 64, 2)
        b.data = bytes(128)   # a mutable blob changes; a frozen one promises not to
        launch(b, device_array(0x7F00_0000_0000), 64, 2)
        launcher = fast.kernel._launchers[fast_keys[0]]
        set_layout(rec, launcher.slow)
        launch(b, device_array(0x7F00_0000_0000), 64, 2)
        sent = recorded_params(rec, launcher.slow)[:128]
        assert sent == (bytes((3 * 7 + i) % 256 for i in range(128)) if cls is FrozenBlob else bytes(128))


def test_dependency_change_recompiles_through_the_c_bound(mod, rec, monkeypatch):
    global SCALE
    h = Harness(saxpy, mod, rec, monkeypatch, use_native=True)
    out, x = device_array(0x7F00_0000_0000), device_array(0x7F00_0000_1000)
    launch = h.kernel[4, 128]
    launch(out, x, 100, 1.5, True, 3)
    launch(out, x, 100, 1.5, True, 3)
    compiled = list(h.kernel._kernels.values())
    old = SCALE
    try:
        SCALE = 3.0
        launch(out, x, 100, 1.5, True, 3)
        assert list(h.kernel._kernels.values()) != compiled    # recompiled for the new global
    finally:
        SCALE = old


def test_fallback_warns_once_and_launches_through_ctypes(rec, monkeypatch):
    monkeypatch.setattr(native, "_state", {})
    monkeypatch.setattr(native, "_find", lambda build_dir: (None, "test: no module"))
    monkeypatch.delenv(native.KNOB, raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert native.load() is None
        assert native.load() is None
    assert len([w for w in caught if "native launcher is not available" in str(w.message)]) == 1
    assert "test: no module" in native.status()
    kernel = tylo.jit(arch="sm_80")(saxpy)
    launch = kernel[1, 32]
    assert type(launch).__name__ == "_Bound"

    def launcher(ck):       # the ctypes Launcher, its driver entry points the recorder
        if ck._launcher is None:
            ck._launcher = fake_slow(ck.param_ctypes, rec, function=0xF00D)
        return ck._launcher
    monkeypatch.setattr(tylo.CompiledKernel, "launcher", property(launcher))
    out, x = device_array(0x7F00_0000_0000), device_array(0x7F00_0000_1000)
    forget_layout(rec)
    launch(out, x, 100, 1.5, True, 3)
    slow = next(iter(kernel._launchers.values()))
    assert type(slow) is Launcher
    set_layout(rec, slow)
    before = rec.rec_calls()
    launch(out, x, 100, 1.5, True, 3)
    assert rec.rec_calls() == before + 1
    slow.pack((out.ptr, x.ptr, 100, 1.5, 1))
    assert recorded_params(rec, slow) == slow.param_buffer()


def test_knob_off_is_silent(monkeypatch):
    monkeypatch.setattr(native, "_state", {})
    monkeypatch.setenv(native.KNOB, "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert native.load() is None
    assert "TYLO_NATIVE_LAUNCH=0" in native.status()
    monkeypatch.setattr(native, "_state", {})
    monkeypatch.setenv(native.KNOB, "maybe")
    with pytest.raises(ValueError, match="TYLO_NATIVE_LAUNCH"):
        native.load()


def test_build_without_a_compiler_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.raises(RuntimeError, match="no C compiler"):
        native.build(tmp_path / "out")
    monkeypatch.setattr(native, "_installed_copy", lambda digest: None)
    monkeypatch.setattr(native, "_in_tree", lambda digest: (None, "test: no in-tree module"))
    module, why = native._find(tmp_path / "native")
    assert module is None and "test: no in-tree module" in why and "no C compiler" in why


def test_an_unwritable_build_folder_falls_back_to_a_temporary_one(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setattr(native, "_installed_copy", lambda digest: None)
    monkeypatch.setattr(native, "_in_tree", lambda digest: (None, "test: no in-tree module"))
    module, why = native._find(blocker)
    assert module is not None and why is None and "tylo-native-" in module.__file__


def test_stale_build_is_not_used(tmp_path, monkeypatch, mod):
    path = native.build(tmp_path / "b")
    with pytest.raises(ImportError, match="another native_launch.c"):
        native.load_file(path, digest="0" * 64)


def test_an_installed_copy_of_the_same_source_is_found(tmp_path, monkeypatch, mod):
    """Tests run from the source tree after ``pip install .`` (CI) use the installed build."""
    site = tmp_path / "site"
    path = native.build(site / "tylo" / "runtime")
    monkeypatch.syspath_prepend(str(site))
    found = native._installed_copy(native.source_digest())
    assert found is not None and found.__file__ == str(path)
    assert native._installed_copy("0" * 64) is None     # another source: not used


def test_implicit_stream_getters(mod, rec, monkeypatch):
    """Launches without stream= go to the getter's stream (torch's current stream in real use):
    a callable, or (outer, inner) called as outer(inner()) as streams.py describes torch's."""
    h = Harness(saxpy, mod, rec, monkeypatch, use_native=True)
    out, x = device_array(0x7F00_0000_0000), device_array(0x7F00_0000_1000)
    launch = h.kernel[4, 128]
    launch(out, x, 100, 1.5, True, 3)
    slow = h.slow_calls
    h.kernel._dispatcher.set_stream_getter((lambda device: 1000 + device, lambda: 7))
    launch(out, x, 100, 1.5, True, 3)
    assert rec.rec_stream() == 1007
    h.kernel._dispatcher.set_stream_getter(lambda: 99)
    launch(out, x, 100, 1.5, True, 3)
    assert rec.rec_stream() == 99
    launch(out, x, 100, 1.5, True, 3, stream=5)     # an explicit stream wins
    assert rec.rec_stream() == 5 and h.slow_calls == slow
    with pytest.raises(TypeError, match="stream getter"):
        h.kernel._dispatcher.set_stream_getter((1, 2))
    from tylo.runtime.streams import current_stream_getter
    assert current_stream_getter(DeviceArray) is None


def test_no_reference_leaks(mod, rec, monkeypatch):
    """Fast launches, slow ones and errors leave every argument's reference count as it was."""
    import sys

    from tylo.lang import tma
    h = Harness(blobbed, mod, rec, monkeypatch, use_native=True)
    blob = FrozenBlob(tma.TMATile(tylo.bf16, (128, 64)), 5)
    out = device_array(0x7F00_0000_0000)
    n = 1000 + 2**20                     # not a small cached int
    launch = h.kernel[2, 32]
    clustered = h.kernel[2, 32, 2]
    cluster = clustered.cluster
    launch(blob, out, n, 2)
    launch(blob, out, n, 2)              # the first launch in C remembers the blob (one reference)
    clustered(blob, out, n, 2)
    counts = [sys.getrefcount(o) for o in (blob, out, n, blob.data, cluster)]
    for _ in range(1000):
        launch(blob, out, n, 2)
        launch(blob, out, n, 2, stream=3)
        clustered(blob, out, n, 2)
        with pytest.raises(TypeError):
            launch(blob, "out", n, 2)
        with pytest.raises(TypeError):
            clustered(blob, "out", n, 2)
    assert [sys.getrefcount(o) for o in (blob, out, n, blob.data, cluster)] == counts
