"""The launch path: libcuda through ctypes, one prepared buffer per kernel.

When the native launcher is loaded (``native.py``, ``native_launch.c``), ``make_launcher`` wraps
the ``Launcher`` below in a ``native.Launcher`` that packs the same layout (``ArgPacker.slots``)
in C and calls ``cuLaunchKernel`` directly; this module's ``Launcher`` is then its reference and
its error path (``_native_pack_error``, ``_native_failed``), and the fallback when it is not.

A ``Launcher`` is built once per compiled kernel. It lays out, in ONE
preallocated host buffer:

    [ kernel parameters, each at its natural alignment ][ CUlaunchConfig ][ cluster attribute ][ PDL attribute ]

and a ``void*[n]`` array pointing at each parameter, both made once. A launch
is then:

  1. one ``struct.Struct.pack_into`` call that writes every parameter value and
     the grid/block/shared/stream fields of the CUlaunchConfig (and the cluster
     dimensions of the attribute) in a single C call: no per-parameter Python
     work, range-checked by struct (an i32 parameter given 2**40 raises instead
     of wrapping silently as a ctypes slot would);
  2. one ctypes call of ``cuLaunchKernelEx(&config, f, params, NULL)``, which has
     four pointer-sized arguments (``cuLaunchKernel``'s eleven arguments cost
     about twice as much ctypes conversion; measured with ``_call_cost_ns``).

Measured on the lent H200 host (2026-11-30, noisy VM Xeon; interleaved medians
of 64-launch batches, empty 4-parameter kernel; tests/runtime/bench_launch_detail.py):
bare ctypes cuLaunchKernelEx on a prepared buffer ~4.9 us (that is the driver),
``Launcher.launch`` ~6.2 us, ctypes slots + cuda-bindings cuLaunchKernel ~6.3 us,
ctypes cuLaunchKernel with 11 converted arguments ~7.2 us bare / ~8.3 us with
packing. pack_into of 4 params + config ~0.4-0.6 us there; ``_pack_cost_ns``
and ``_launch_cost_ns`` re-measure on any machine.

Threads: the buffer belongs to the thread that built the Launcher. Another
thread launching the same kernel gets its own clone (own buffer), made on its
first launch, so concurrent launches never share argument memory (ctypes
releases the GIL during the driver call).

If the calling thread has no current CUDA context, the launch fails with
CUDA_ERROR_INVALID_CONTEXT; the Launcher then makes the context it was built
in current and retries once, so the hot path needs no context check.
"""

from __future__ import annotations

import ctypes
import struct
import threading
import time

from .errors import CudaError

__all__ = ["Launcher", "ArgPacker", "make_launcher", "native_launcher", "CUlaunchConfig", "CUlaunchAttribute",
           "CUlaunchAttributeValue", "CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION",
           "CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION"]

CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4
CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6
_CUDA_ERROR_INVALID_CONTEXT = 201
_SMEM_OPTIN_THRESHOLD = 48 * 1024


# --------------------------------------------------------- cuda.h structures
# typedef union CUlaunchAttributeValue_union { char pad[64]; ...; struct {unsigned x, y, z;}
#   clusterDim; ... } CUlaunchAttributeValue;       (64 bytes, pointer-aligned members)
# typedef struct CUlaunchAttribute_st { CUlaunchAttributeID id; char pad[8 - sizeof(id)];
#   CUlaunchAttributeValue value; } CUlaunchAttribute;                    (72 bytes)
# typedef struct CUlaunchConfig_st { unsigned gridDimX, gridDimY, gridDimZ, blockDimX,
#   blockDimY, blockDimZ, sharedMemBytes; CUstream hStream; CUlaunchAttribute *attrs;
#   unsigned numAttrs; } CUlaunchConfig;                                   (56 bytes)

class _Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


class CUlaunchAttributeValue(ctypes.Union):
    _fields_ = [("pad", ctypes.c_char * 64), ("clusterDim", _Dim3),
                ("cooperative", ctypes.c_int), ("programmaticStreamSerializationAllowed", ctypes.c_int),
                ("_align", ctypes.c_void_p)]


class CUlaunchAttribute(ctypes.Structure):
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4),
                ("value", CUlaunchAttributeValue)]


class CUlaunchConfig(ctypes.Structure):
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint),
                ("gridDimZ", ctypes.c_uint), ("blockDimX", ctypes.c_uint),
                ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(CUlaunchAttribute)), ("numAttrs", ctypes.c_uint)]


# struct formats that write the same bytes as the Structures above
_CONFIG_FMT = "7I4xQQI4x"      # grid3, block3, shared, (pad), stream, attrs, numAttrs, (pad)
_ATTR_FMT = "I4x3I52x"         # id, (pad), clusterDim x/y/z, (rest of the 64-byte union)
_ATTR_SIZE = 72
assert struct.calcsize("<" + _CONFIG_FMT) == ctypes.sizeof(CUlaunchConfig) == 56
assert struct.calcsize("<" + _ATTR_FMT) == ctypes.sizeof(CUlaunchAttribute) == 72
assert CUlaunchConfig.hStream.offset == 32 and CUlaunchConfig.numAttrs.offset == 48
assert CUlaunchAttribute.value.offset == 8


def max_active_clusters(function: int, block, shared_bytes: int, cluster_size: int) -> int:
    """How many clusters of ``cluster_size`` CTAs (``block`` threads, ``shared_bytes`` of dynamic shared memory
    each) of ``function`` the device runs at once (cuOccupancyMaxActiveClusters). A persistent grid of clusters
    must not exceed it: clusters past it start only when a resident one exits, after all of its jobs. It can be
    less than the SM count over ``cluster_size`` (H200: 30 clusters of 4 CTAs that each fill an SM, not 33): a
    cluster's CTAs share a GPC."""
    from . import driver
    driver.ensure_context()
    bx, by, bz = block
    attr = CUlaunchAttribute(id=CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
    attr.value.clusterDim = _Dim3(cluster_size, 1, 1)
    config = CUlaunchConfig(gridDimX=cluster_size, gridDimY=1, gridDimZ=1, blockDimX=bx, blockDimY=by, blockDimZ=bz,
                            sharedMemBytes=shared_bytes, attrs=ctypes.pointer(attr), numAttrs=1)
    count = ctypes.c_int()
    driver._call("cuOccupancyMaxActiveClusters", ctypes.byref(count), ctypes.c_void_p(function),
                 ctypes.byref(config))
    return count.value


# ------------------------------------------------------------------- libcuda

_lib_state: dict = {}
_lib_lock = threading.Lock()
_get_ident = threading.get_ident


def _libcuda():
    """(cuLaunchKernel, cuLaunchKernelEx, cuGetErrorName, cuGetErrorString),
    resolved once with argtypes/restype; raises NoGPUError without libcuda."""
    fns = _lib_state.get("fns")
    if fns is not None:
        return fns
    with _lib_lock:
        if "fns" in _lib_state:
            return _lib_state["fns"]
        from .driver import _dll  # the one libcuda.so.1 handle of the process

        lib = _dll()  # raises NoGPUError(DRIVER_NOT_FOUND) without libcuda
        vp, u = ctypes.c_void_p, ctypes.c_uint
        launch = lib.cuLaunchKernel
        launch.argtypes = [vp, u, u, u, u, u, u, u, vp, vp, vp]
        launch.restype = ctypes.c_int
        launch_ex = lib.cuLaunchKernelEx
        launch_ex.argtypes = [vp, vp, vp, vp]
        launch_ex.restype = ctypes.c_int
        get_name = lib.cuGetErrorName
        get_name.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        get_name.restype = ctypes.c_int
        get_string = lib.cuGetErrorString
        get_string.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        get_string.restype = ctypes.c_int
        fns = (launch, launch_ex, get_name, get_string)
        _lib_state["lib"] = lib
        _lib_state["fns"] = fns
        return fns


def _launch_error(code: int, call: str) -> CudaError:
    name = text = None
    try:
        _, _, get_name, get_string = _libcuda()
        s = ctypes.c_char_p()
        if get_name(code, ctypes.byref(s)) == 0 and s.value:
            name = s.value.decode()
        if get_string(code, ctypes.byref(s)) == 0 and s.value:
            text = s.value.decode()
    except Exception:
        pass
    return CudaError(code, name, call, text)


# ------------------------------------------------------------ param formats

_SIGNED = {1: "b", 2: "h", 4: "i", 8: "q"}
_BYTE_TYPES = (ctypes.c_uint8, ctypes.c_int8, ctypes.c_char)


def _param_format(t) -> tuple[str, int, int, str]:
    """(struct format, size, alignment, description) of one parameter ctype."""
    if isinstance(t, type) and issubclass(t, ctypes.Array):
        if t._type_ in _BYTE_TYPES:
            n = t._length_
            return f"{n}s", n, 64, f"{n}-byte blob"
        raise TypeError(f"unsupported array parameter type {t.__name__}: only byte arrays "
                        "(ctypes.c_uint8 * N) are allowed")
    if not (isinstance(t, type) and issubclass(t, ctypes._SimpleCData)):
        raise TypeError(f"unsupported parameter type {t!r}: expected a ctypes scalar type "
                        "or ctypes.c_uint8 * N")
    code, size = t._type_, ctypes.sizeof(t)
    if code in "bhilq":
        fmt = _SIGNED[size]
        desc = f"i{8 * size}"
    elif code in "BHILQ":
        fmt = _SIGNED[size].upper()
        desc = f"u{8 * size}"
    elif code == "P":
        fmt, desc = "Q", "pointer"
    elif code == "f":
        fmt, desc = "f", "f32"
    elif code == "d":
        fmt, desc = "d", "f64"
    elif code == "?":
        fmt, desc = "?", "bool"
    else:
        raise TypeError(f"unsupported parameter type {t.__name__}")
    return fmt, size, size, desc


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


class ArgPacker:
    """The driver-free half of a Launcher: the prepared buffer, the
    ``void*[n]`` array and the packing. Tests inspect it on a CPU machine."""

    def __init__(self, param_ctypes, names=None, programmatic=False):
        self.param_ctypes = list(param_ctypes)
        self.programmatic = bool(programmatic)
        n = len(self.param_ctypes)
        self.names = list(names) if names is not None else [f"#{i}" for i in range(n)]
        if len(self.names) != n:
            raise ValueError(f"{len(self.names)} parameter names for {n} parameters")
        fmts, offsets, descs, blobs, slots = [], [], [], [], []
        off = 0
        for i, t in enumerate(self.param_ctypes):
            fmt, size, align, desc = _param_format(t)
            start = _align(off, align)
            if start > off:
                fmts.append(f"{start - off}x")
            fmts.append(fmt)
            offsets.append(start)
            slots.append(("s" if fmt.endswith("s") else fmt, start, size))
            descs.append(desc)
            if fmt.endswith("s"):
                blobs.append((i, size))
            off = start + size
        self.slots = tuple(slots)      # (struct code, offset, size) per parameter: the native layout
        self.param_bytes = off
        cfg_off = _align(off, 64)
        if cfg_off > off:
            fmts.append(f"{cfg_off - off}x")
        attr_off = cfg_off + 56
        total = attr_off + 2 * _ATTR_SIZE      # the cluster attribute, then the programmatic one (fixed)
        self._param_fmt = "".join(fmts)
        self.offsets = offsets
        self.config_offset = cfg_off
        self.attr_offset = attr_off
        self._descs = descs
        self._blobs = tuple(blobs)
        # 64 spare bytes so the base can be 64-byte aligned
        self._storage = (ctypes.c_uint8 * (total + 64))()
        addr = ctypes.addressof(self._storage)
        base = _align(addr, 64) - addr
        self._base = base
        self._addr = addr + base
        self._params = (ctypes.c_void_p * max(n, 1))(*[self._addr + o for o in offsets])
        self._params_addr = ctypes.addressof(self._params)
        self._cfg_addr = self._addr + cfg_off
        self._attr_addr = self._addr + attr_off
        s_plain = struct.Struct("<" + self._param_fmt + _CONFIG_FMT)
        s_cluster = struct.Struct("<" + self._param_fmt + _CONFIG_FMT + _ATTR_FMT)
        assert s_plain.size == attr_off and s_cluster.size == attr_off + _ATTR_SIZE
        # a kernel that waits on the grids before it (griddepcontrol.wait) launches with programmatic stream
        # serialization: the attribute after the cluster's, written once; a plain launch points at it alone
        pdl_off = attr_off + _ATTR_SIZE
        struct.pack_into("<I4xi", self._storage, base + pdl_off, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
                         1)
        self._plain_attrs = (self._addr + pdl_off, 1) if self.programmatic else (0, 0)
        self._cluster_attrs = 2 if self.programmatic else 1
        self._pack_plain = s_plain.pack_into
        self._pack_cluster = s_cluster.pack_into

    # ---- packing (same statements as the launch fast path) ----
    def pack(self, values, grid=(1, 1, 1), block=(1, 1, 1), stream=0, shared_bytes=0,
             cluster=None):
        """Write ``values`` and a launch configuration into the buffer, exactly
        as a launch does; raise TypeError/ValueError for bad values."""
        gx, gy, gz = grid
        bx, by, bz = block
        if self._blobs:
            self._check_blobs(values)
        try:
            if cluster is None:
                self._pack_plain(self._storage, self._base, *values, gx, gy, gz, bx, by, bz,
                                 shared_bytes, stream, *self._plain_attrs)
            else:
                cx, cy, cz = cluster
                self._pack_cluster(self._storage, self._base, *values, gx, gy, gz, bx, by, bz,
                                   shared_bytes, stream, self._attr_addr, self._cluster_attrs,
                                   CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, cx, cy, cz)
        except Exception:
            raise self._bad_args(values, (gx, gy, gz, bx, by, bz, shared_bytes, stream)) from None

    def param_buffer(self) -> bytes:
        """The packed parameters (offset 0 up to the end of the last one), as the driver reads them."""
        return ctypes.string_at(self._addr, self.param_bytes)

    def _native_pack_error(self, values, launch_fields) -> Exception:
        """The native launcher could not pack ``values``: the exception this path raises for them."""
        try:
            if self._blobs:
                self._check_blobs(values)
        except TypeError as exc:
            return exc
        return self._bad_args(values, launch_fields)

    def param_pointers(self) -> list[int]:
        """The addresses stored in the ``void*[n]`` array."""
        return [self._params[i] for i in range(len(self.param_ctypes))]

    def read_param(self, i: int):
        """Read parameter ``i`` back through its ``void*`` (what the driver reads)."""
        t = self.param_ctypes[i]
        ptr = self._params[i]
        if issubclass(t, ctypes.Array):
            return ctypes.string_at(ptr, ctypes.sizeof(t))
        return t.from_address(ptr).value

    def config(self) -> CUlaunchConfig:
        """A ctypes view of the prepared CUlaunchConfig."""
        return CUlaunchConfig.from_address(self._cfg_addr)

    def attribute(self, index=0) -> CUlaunchAttribute:
        """A ctypes view of the prepared CUlaunchAttributes: 0 the cluster's, 1 programmatic stream serialization."""
        return CUlaunchAttribute.from_address(self._attr_addr + index * _ATTR_SIZE)

    # ---- slow-path diagnostics ----
    def _check_blobs(self, values):
        for i, n in self._blobs:
            if i < len(values):
                v = values[i]
                if not isinstance(v, (bytes, bytearray)) or len(v) != n:
                    got = f"{len(v)} bytes" if isinstance(v, (bytes, bytearray)) else type(v).__name__
                    raise TypeError(f"parameter {self.names[i]}: expected {n} bytes "
                                    f"(bytes object), got {got}")

    def _bad_args(self, values, launch_fields) -> Exception:
        n = len(self.param_ctypes)
        try:
            count = len(values)
        except TypeError:
            return TypeError(f"launch values must be a sequence, got {type(values).__name__}")
        if count != n:
            return TypeError(f"kernel takes {n} parameters, got {count} values")
        for i, (v, t) in enumerate(zip(values, self.param_ctypes)):
            fmt = _param_format(t)[0]
            try:
                struct.pack("<" + fmt, v)
            except struct.error as e:
                msg = str(e)
                if "integer" in msg or "float" in msg or "bytes" in msg:
                    return TypeError(f"parameter {self.names[i]}: expected a {self._descs[i]} "
                                     f"value, got {type(v).__name__} {v!r:.80}")
                return ValueError(f"parameter {self.names[i]}: {v!r:.80} does not fit "
                                  f"in {self._descs[i]} ({msg})")
            except (TypeError, OverflowError) as e:
                return TypeError(f"parameter {self.names[i]}: expected a {self._descs[i]} "
                                 f"value, got {type(v).__name__} {v!r:.80} ({e})")
        labels = ("grid x", "grid y", "grid z", "block x", "block y", "block z",
                  "shared bytes", "stream")
        for label, v in zip(labels, launch_fields):
            fmt = "Q" if label == "stream" else "I"
            try:
                struct.pack("<" + fmt, v)
            except (struct.error, TypeError, OverflowError):
                return ValueError(f"launch {label} must be a non-negative integer that fits "
                                  f"in {'64' if fmt == 'Q' else '32'} bits, got {v!r:.80}")
        return ValueError("launch arguments could not be packed")


class Launcher(ArgPacker):
    """Prepared launcher of one CUfunction.

    ``Launcher(function, param_ctypes, shared_bytes=0, *, names=None)``:
    ``param_ctypes`` are ctypes scalar types (c_uint64 for pointers, c_int32,
    ..., c_uint16 for f16/bf16 raw bits) or ``ctypes.c_uint8 * N`` for a
    by-value byte blob (a 128-byte TMA descriptor); ``shared_bytes`` is the
    DYNAMIC shared memory of every launch (static shared memory is in the
    cubin). Above 48 KiB the constructor opts the function in once with
    cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES).
    """

    def __init__(self, function: int, param_ctypes, shared_bytes: int = 0, *, names=None, programmatic=False,
                 _clone_of: "Launcher | None" = None):
        super().__init__(param_ctypes, names, programmatic)
        self.function = int(function)
        self.shared_bytes = int(shared_bytes)
        self._owner = threading.get_ident()
        self._clones: dict[int, Launcher] = {}
        self._clone_lock = threading.Lock()
        (self._cu_launch, self._cu_launch_ex, _, _) = _libcuda()
        if _clone_of is not None:
            self._ctx = _clone_of._ctx
            return
        from . import driver
        self._ctx = driver.current_context()
        if self.shared_bytes > _SMEM_OPTIN_THRESHOLD:
            driver.set_max_dynamic_shared_memory(self.function, self.shared_bytes)

    def launch(self, gx, gy, gz, bx, by, bz, stream, values):
        """Launch on ``stream`` (int handle; 0 = legacy default stream) with
        parameter ``values`` (a sequence, in order)."""
        if _get_ident() != self._owner:
            return self._other_thread().launch(gx, gy, gz, bx, by, bz, stream, values)
        if self._blobs:
            self._check_blobs(values)
        try:
            self._pack_plain(self._storage, self._base, *values, gx, gy, gz, bx, by, bz,
                             self.shared_bytes, stream, *self._plain_attrs)
        except Exception:
            raise self._bad_args(values, (gx, gy, gz, bx, by, bz, self.shared_bytes, stream)) \
                from None
        r = self._cu_launch_ex(self._cfg_addr, self.function, self._params_addr, None)
        if r:
            self._failed(r, "cuLaunchKernelEx")

    def launch_cluster(self, grid3, block3, cluster3, stream, values):
        """Launch with a thread-block cluster of shape ``cluster3`` (sm_90+),
        via cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION."""
        if _get_ident() != self._owner:
            return self._other_thread().launch_cluster(grid3, block3, cluster3, stream, values)
        gx, gy, gz = grid3
        bx, by, bz = block3
        cx, cy, cz = cluster3
        if self._blobs:
            self._check_blobs(values)
        try:
            self._pack_cluster(self._storage, self._base, *values, gx, gy, gz, bx, by, bz,
                               self.shared_bytes, stream, self._attr_addr, self._cluster_attrs,
                               CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, cx, cy, cz)
        except Exception:
            for label, v in (("cluster x", cx), ("cluster y", cy), ("cluster z", cz)):
                if not isinstance(v, int) or not 0 < v < 2**32:
                    raise ValueError(f"launch {label} must be a positive integer, got {v!r}") \
                        from None
            raise self._bad_args(values, (gx, gy, gz, bx, by, bz, self.shared_bytes, stream)) \
                from None
        r = self._cu_launch_ex(self._cfg_addr, self.function, self._params_addr, None)
        if r:
            self._failed(r, "cuLaunchKernelEx")

    def launch_basic(self, gx, gy, gz, bx, by, bz, stream, values):
        """The same launch through cuLaunchKernel (11 ctypes arguments): kept
        for comparison and for drivers without cuLaunchKernelEx (it takes no attributes: a
        ``programmatic`` kernel launched so simply waits for the kernel before it)."""
        if _get_ident() != self._owner:
            return self._other_thread().launch_basic(gx, gy, gz, bx, by, bz, stream, values)
        self.pack(values)
        r = self._cu_launch(self.function, gx, gy, gz, bx, by, bz, self.shared_bytes,
                            stream, self._params_addr, None)
        if r:
            if r == _CUDA_ERROR_INVALID_CONTEXT and self._make_context_current():
                r = self._cu_launch(self.function, gx, gy, gz, bx, by, bz, self.shared_bytes,
                                    stream, self._params_addr, None)
            if r:
                raise _launch_error(r, "cuLaunchKernel")

    # ---- slow paths ----
    def _native_failed(self, code: int, call: str, retried: int) -> bool:
        """The native launcher's CUDA error ``code``: True to retry once after making this
        Launcher's context current (no context on the calling thread); else raise CudaError."""
        if not retried and code == _CUDA_ERROR_INVALID_CONTEXT and self._make_context_current():
            return True
        raise _launch_error(code, call)

    def _other_thread(self) -> "Launcher":
        tid = threading.get_ident()
        clone = self._clones.get(tid)
        if clone is None:
            with self._clone_lock:
                clone = self._clones.get(tid)
                if clone is None:
                    clone = Launcher(self.function, self.param_ctypes, self.shared_bytes,
                                     names=self.names, programmatic=self.programmatic, _clone_of=self)
                    self._clones[tid] = clone
        return clone

    def _make_context_current(self) -> bool:
        if not self._ctx:
            return False
        from . import driver
        try:
            driver._set_current(self._ctx)
        except CudaError:
            return False
        return True

    def _failed(self, r: int, call: str):
        # no current context on this thread: make the Launcher's current, retry once
        if r == _CUDA_ERROR_INVALID_CONTEXT and self._make_context_current():
            r = self._cu_launch_ex(self._cfg_addr, self.function, self._params_addr, None)
            if not r:
                return
        raise _launch_error(r, call)


# ------------------------------------------------------------- native path

def _entry_address(name: str) -> int:
    _libcuda()
    return ctypes.cast(getattr(_lib_state["lib"], name), ctypes.c_void_p).value


def make_launcher(native, function: int, param_ctypes, shared_bytes: int = 0, *, names=None, programmatic=False):
    """The launcher of one kernel variant: ``native.Launcher`` (``native``: the module of
    ``tylo.runtime.native.load()``) wrapping a ctypes ``Launcher`` that it hands errors to, or the
    ctypes ``Launcher`` itself when ``native`` is None. Both have ``launch(gx, gy, gz, bx, by, bz,
    stream, values)`` and ``launch_cluster(grid3, block3, cluster3, stream, values)``; with
    ``programmatic`` every launch allows programmatic stream serialization (the kernel waits on the grids
    before it with ``griddepcontrol.wait``)."""
    slow = Launcher(function, param_ctypes, shared_bytes, names=names, programmatic=programmatic)
    if native is None:
        return slow
    return native_launcher(native, slow)


def native_launcher(native, slow: ArgPacker, function: int | None = None):
    """``native.Launcher`` with ``slow``'s parameter layout and error messages. ``function``
    defaults to ``slow.function``; the driver entry points come from tylo's libcuda handle."""
    return native.Launcher(slow.function if function is None else function,
                           _entry_address("cuLaunchKernel"), _entry_address("cuLaunchKernelEx"),
                           slow.slots, slow.param_bytes, getattr(slow, "shared_bytes", 0), slow)


# ------------------------------------------------------------- measurements

def _pack_cost_ns(n_calls: int = 200_000, repeat: int = 5) -> dict:
    """Host cost of the packing step on this CPU (4 params: 2 pointers, i32,
    f32), in ns per call, next to the per-slot ctypes alternative. No GPU."""
    import timeit

    types = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int32, ctypes.c_float]
    vals = (0x7F00_0000_1000, 0x7F00_0000_2000, 1024, 1.5)
    p = ArgPacker(types)
    pk, st, base = p._pack_plain, p._storage, p._base

    def packed():
        pk(st, base, *vals, 1, 1, 1, 128, 1, 1, 0, 0, 0, 0)

    slots = [t() for t in types]

    def per_slot():
        for s, v in zip(slots, vals):
            s.value = v

    def best(f):
        return min(timeit.repeat(f, number=n_calls, repeat=repeat)) / n_calls * 1e9

    return {"struct_pack_into_ns": best(packed), "ctypes_slots_ns": best(per_slot)}


_EMPTY_PTX = b"""
.version 7.0
.target sm_70
.address_size 64
.visible .entry tylo_empty(.param .u64 a, .param .u64 b, .param .u32 n, .param .f32 s)
{
    ret;
}
"""


def _launch_cost_ns(batch: int = 256, repeat: int = 40) -> dict:
    """Host cost per launch of an empty 4-parameter kernel on this machine's
    GPU, in ns (median over ``repeat`` timed batches of ``batch`` launches; the
    batches are short so that the launch queue never fills and the GPU's own
    throughput is not what is measured). Entries: ``Launcher.launch``
    (cuLaunchKernelEx), ``launch_cluster``, ``launch_basic`` (ctypes
    cuLaunchKernel), the native launcher's ``launch`` (when it loads), the bare
    ctypes cuLaunchKernelEx call on a prepared buffer, and cuda-bindings'
    cuLaunchKernel. Needs a GPU."""
    import statistics

    from . import driver

    driver.ensure_context(0)
    mod = driver.load_module(_EMPTY_PTX)
    fn = driver.get_function(mod, "tylo_empty")
    L = Launcher(fn, [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int32, ctypes.c_float])
    vals = (0, 0, 1024, 1.5)
    res = {}

    def run(name, f):
        for _ in range(batch):
            f()
        driver.synchronize()
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter_ns()
            for _ in range(batch):
                f()
            t1 = time.perf_counter_ns()
            driver.synchronize()
            times.append((t1 - t0) / batch)
        res[name] = statistics.median(times)
        res[name.replace("_ns", "_min_ns")] = min(times)

    def loop_overhead():
        pass

    run("empty_python_call_ns", loop_overhead)
    run("launcher_launch_ns", lambda: L.launch(1, 1, 1, 32, 1, 1, 0, vals))
    run("launcher_launch_cluster_ns",
        lambda: L.launch_cluster((2, 1, 1), (32, 1, 1), (1, 1, 1), 0, vals))
    run("launcher_launch_basic_ns", lambda: L.launch_basic(1, 1, 1, 32, 1, 1, 0, vals))
    from . import native
    module = native.load()
    if module is not None:
        N = native_launcher(module, L)
        run("native_launcher_launch_ns", lambda: N.launch(1, 1, 1, 32, 1, 1, 0, vals))
    L.pack(vals, grid=(1, 1, 1), block=(32, 1, 1))
    ex, cfg, func, params = L._cu_launch_ex, L._cfg_addr, L.function, L._params_addr
    run("ctypes_cuLaunchKernelEx_call_only_ns", lambda: ex(cfg, func, params, None))
    d = driver._bindings()
    f = d.CUfunction(fn)
    cvals = (ctypes.c_uint64(0), ctypes.c_uint64(0), ctypes.c_int32(1024), ctypes.c_float(1.5))
    arr = (ctypes.c_void_p * 4)(*[ctypes.addressof(v) for v in cvals])
    addr = ctypes.addressof(arr)
    run("cuda_bindings_cuLaunchKernel_ns",
        lambda: d.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, addr, 0))
    driver.unload_module(mod)
    return res
