"""``@tylo.jit`` and ``@tylo.func``: specialisation, compilation, caching and launch.

The launch fast path (``kernel[grid, block](*args)``) classifies each
argument with a per-type function cached by ``type(arg)``, looks the
specialisation up in a per-kernel dictionary and fills a prepared ctypes
argument buffer; nothing on it hashes source or allocates beyond the key
tuple. A miss compiles (or loads from the disk cache) once.

When the native launcher is loaded (``tylo.runtime.native``), ``kernel[grid, block]`` is its
``Bound``: the same classification, written in C per parameter (``_native_code`` says which C
code computes what each Python classifier returns), the lookup in the same dictionary and the
launch, with no Python bytecode on a hit; everything else (a new argument type, a miss, keyword
arguments, errors) calls ``_launch`` below, the reference.
"""
from __future__ import annotations

import inspect
import os
import time
from dataclasses import dataclass, field

from . import knobs
from ._version import __version__ as _version
from ._version import source_digest
from .cache import cache_key, default_cache
from .cache.disk import ARTIFACT_FILES
from .codegen.compile import Resources, toolchain_versions
from .codegen.targets import get_target, resource_limits, target_for_capability
from .ir import types as T
from .ir.types import ConstexprMarker, PointerType, ScalarType
from .specialization import BlobSpec, ConstexprSpec, IntSpec, PointerSpec, ScalarSpec, format_signature, parse_signature

__all__ = ["jit", "func", "JITFunction", "CompiledKernel", "parse_signature"]

_MISSING = object()


def func(fn):
    """Mark a helper to be inlined where a kernel calls it."""
    fn.__tylo_func__ = fn
    return fn


@dataclass
class _ParamSpec:
    name: str
    constexpr: bool
    annotation: object  # ScalarType, PointerType or None
    default: object


@dataclass
class CompiledKernel:
    """One compiled specialisation: artifacts, resources, and (once loaded) its launcher."""

    name: str
    arch: str
    signature: str
    key: str
    ir: str
    llvm: str
    ptx: str
    cubin: bytes
    resources: object
    shared_bytes: int  # dynamic shared memory set on every launch
    param_types: list
    compile_ms: dict = field(default_factory=dict)
    from_cache: bool = False
    _launcher: object = None

    @property
    def static_shared_bytes(self) -> int:
        """Shared memory the cubin declares statically (nvJitLink's report)."""
        return int(getattr(self.resources, "shared_bytes", 0) or 0)

    @property
    def total_shared_bytes(self) -> int:
        """What a launch uses: static plus the dynamic bytes set on every launch."""
        return self.static_shared_bytes + self.shared_bytes

    def __repr__(self):
        # one line: the artifacts (IR, LLVM, PTX, cubin bytes) are attributes, not part of the repr
        regs = getattr(self.resources, "registers", "?")
        where = ", from cache" if self.from_cache else ""
        return (f"<CompiledKernel {self.name} [{self.arch}] ({self.signature}) key={self.key[:12]} regs={regs} "
                f"shared={self.static_shared_bytes}+{self.shared_bytes}B cubin={len(self.cubin)}B{where}>")

    @property
    def param_ctypes(self) -> list:
        """The ctypes type of each launch parameter (c_uint64 for pointers, ``c_uint8 * 128`` for a
        TMA descriptor): the layout of the argument buffer."""
        return [_ctype(t) for t in self.param_types]

    def max_active_clusters(self, cluster_size: int, block) -> int:
        """Clusters of ``cluster_size`` CTAs of ``block`` threads that the current device runs at once (the
        driver's occupancy count): the most a persistent grid of clusters should launch."""
        from .runtime.launch import max_active_clusters
        return max_active_clusters(self.launcher.function, _dim3(block, "block"), self.shared_bytes, cluster_size)

    @property
    def launcher(self):
        if self._launcher is None:
            from .runtime import driver, native
            from .runtime.launch import make_launcher

            driver.ensure_context()
            module = driver.load_module(self.cubin)
            function = driver.get_function(module, self.name)
            self._launcher = make_launcher(native.load(), function, self.param_ctypes, self.shared_bytes,
                                           programmatic=self.waits_on_prior_grids)
        return self._launcher

    @property
    def waits_on_prior_grids(self) -> bool:
        """Whether the kernel waits on the grids before it (``grid_dependency_wait``): then it is launched with
        programmatic stream serialization and may start while they finish. Read from the PTX, so a kernel served
        from the cache knows it too."""
        from .codegen.ptx.sync import waits_on_prior_grids
        return waits_on_prior_grids(self.ptx)


def _ctype(t):
    import ctypes

    if isinstance(t, T.ParamBlobType):
        return ctypes.c_uint8 * t.nbytes
    if isinstance(t, PointerType):
        return ctypes.c_uint64
    return {
        "bool": ctypes.c_uint8, "i8": ctypes.c_int8, "i16": ctypes.c_int16, "i32": ctypes.c_int32,
        "i64": ctypes.c_int64, "u8": ctypes.c_uint8, "u16": ctypes.c_uint16, "u32": ctypes.c_uint32,
        "u64": ctypes.c_uint64, "f32": ctypes.c_float, "f64": ctypes.c_double, "f16": ctypes.c_uint16,
        "bf16": ctypes.c_uint16,
    }[t.name]


class _Bound:
    """``kernel[grid, block]`` or ``kernel[grid, block, cluster]``: remembers the launch geometry for one call."""

    __slots__ = ("kernel", "grid", "block", "cluster")

    def __init__(self, kernel, grid, block, cluster=None):
        self.kernel = kernel
        self.grid = grid
        self.block = block
        self.cluster = cluster

    def __call__(self, *args, stream=None, **kwargs):
        return self.kernel._launch(self.grid, self.block, self.cluster, stream, args, kwargs)


def _dim3(x, what: str):
    if isinstance(x, int) and not isinstance(x, bool):
        t = (x, 1, 1)
    else:
        try:
            t = tuple(int(v) for v in x)
        except TypeError:
            raise TypeError(f"{what} must be an int or a tuple of up to 3 ints, got {x!r}") from None
        if not 1 <= len(t) <= 3:
            raise TypeError(f"{what} must have 1 to 3 dimensions, got {x!r}")
        t = t + (1,) * (3 - len(t))
    if any(v < 1 for v in t):
        raise ValueError(f"{what} dimensions must be positive, got {x!r}")
    return t


class JITFunction:
    """A kernel: call as ``kernel[grid, block](*args, stream=None)`` (``kernel[grid, block, cluster]`` for
    thread-block clusters, sm_90+) or ``kernel.launch(...)``."""

    def __init__(self, fn, *, options: dict | None = None):
        self.fn = fn
        self.__tylo_kernel_fn__ = fn
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__doc__ = fn.__doc__
        self.options = dict(options or {})
        # TYLO_INTERPRET=1 or jit(interpret=True): launches run in the CPU interpreter (tylo/interpreting.py)
        self._interpret = bool(self.options.pop("interpret", False)) or os.environ.get("TYLO_INTERPRET") == "1"
        sig = inspect.signature(fn)
        self.params: list[_ParamSpec] = []
        for p in sig.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TypeError(f"kernel {fn.__name__}: *args and **kwargs parameters are not supported")
            ann = p.annotation
            if isinstance(ann, str):  # from __future__ import annotations
                ann = _resolve_annotation(ann, fn)
            constexpr = isinstance(ann, ConstexprMarker) or ann is ConstexprMarker
            if ann is p.empty or constexpr:
                ann = None
            elif not isinstance(ann, (ScalarType, PointerType)):
                raise TypeError(f"kernel {fn.__name__}: parameter '{p.name}' has annotation {ann!r}; use tylo dtypes "
                                f"(tylo.i32), tylo.Ptr[dtype] or tylo.constexpr")
            default = p.default if p.default is not p.empty else _MISSING
            self.params.append(_ParamSpec(p.name, constexpr, ann, default))
        self.index = {p.name: i for i, p in enumerate(self.params)}
        self._bound_cache: dict = {}
        self._kernels: dict = {}  # specialisation key -> CompiledKernel
        self._launchers: dict = {}  # specialisation key -> Launcher (the fast path's only lookup)
        self._nparams = len(self.params)
        self._classifiers: list = [None] * len(self.params)
        self._implicit_stream = None  # current-stream getter of the first torch/cupy argument's framework
        self._arch: str | None = None
        self._deps = None
        self._native = None  # the native launcher module and this kernel's Dispatcher, once loaded
        self._dispatcher = None
        self._native_tried = False

    def __repr__(self):
        return f"<tylo kernel {self.__qualname__}>"

    def __call__(self, *args, **kwargs):
        raise TypeError(f"launch kernel {self.__name__} with {self.__name__}[grid, block](...) or "
                        f"{self.__name__}.launch(grid=..., block=..., ...)")

    # -- launch ---------------------------------------------------------------------
    def __getitem__(self, config):
        bound = self._bound_cache.get(config)
        if bound is None:
            if not isinstance(config, tuple) or len(config) not in (2, 3):
                raise TypeError(f"use {self.__name__}[grid, block](...) or {self.__name__}[grid, block, cluster]"
                                f"(...): grid and block (and cluster) are ints or tuples")
            grid, block = _dim3(config[0], "grid"), _dim3(config[1], "block")
            cluster = _dim3(config[2], "cluster") if len(config) == 3 and config[2] is not None else None
            dispatcher = self._native_dispatcher()
            bound = (_Bound(self, grid, block, cluster) if dispatcher is None
                     else self._native.Bound(dispatcher, grid, block, self, cluster))
            if len(self._bound_cache) < 256:
                self._bound_cache[config] = bound
        return bound

    def launch(self, *args, grid, block, stream=None, cluster=None, **kwargs):
        """The full launch form. ``cluster`` is a thread-block-cluster shape (sm_90+)."""
        return self._launch(_dim3(grid, "grid"), _dim3(block, "block"),
                            None if cluster is None else _dim3(cluster, "cluster"), stream, args, kwargs)

    def _launch(self, grid, block, cluster, stream, args, kwargs):
        # The fast path: classify each argument with the function cached for its type, look the
        # specialisation up, fill the prepared argument buffer. Keep it free of per-call setup.
        if self._interpret:
            from .interpreting import interpret_launch
            return interpret_launch(self, grid, block, cluster, args, kwargs)
        full = args if not kwargs and len(args) == self._nparams else self._bind(args, kwargs)
        key = [block]
        values = []
        classifiers = self._classifiers
        i = 0
        for v in full:
            c = classifiers[i]
            if c is None or c[0] is not type(v):
                c = classifiers[i] = (type(v), *self._classifier(i, v))
                self._implicit_stream = _implicit_stream_getter(classifiers)
                if self._dispatcher is not None:
                    self._sync_native(i)
            k, val = c[1](v)
            key.append(k)
            if val is not _MISSING:
                values.append(val)
            i += 1
        key = tuple(key)
        deps = self._deps
        if deps is not None and not deps.is_current():
            self._check_dependencies()
        launcher = self._launchers.get(key)
        if launcher is None:
            launcher = self._launchers[key] = self._compile_for(key, full, block).launcher
        if stream is None:
            # no stream=: torch's/cupy's current stream when an argument is theirs, else the legacy default
            getter = self._implicit_stream
            handle = 0 if getter is None else getter()
        elif type(stream) is int:
            handle = stream
        else:
            from .runtime.streams import stream_handle
            handle = stream_handle(stream)
        if cluster is None:
            launcher.launch(grid[0], grid[1], grid[2], block[0], block[1], block[2], handle, values)
        else:
            launcher.launch_cluster(grid, block, cluster, handle, values)

    # -- the native fast path ------------------------------------------------------------
    def _native_dispatcher(self):
        """This kernel's ``Dispatcher`` of the native launcher, or None (not loaded, interpreted)."""
        if not self._native_tried:
            self._native_tried = True
            if not self._interpret:
                from .runtime import native

                module = native.load()
                if module is not None:
                    self._native = module
                    self._dispatcher = module.Dispatcher(self._launch, self._launchers, self._nparams, _MISSING)
                    for i, c in enumerate(self._classifiers):
                        if c is not None:
                            self._sync_native(i)
                    if self._deps is not None:
                        self._dispatcher.set_dependency_check(self._deps.is_current)
        return self._dispatcher

    def _sync_native(self, i: int):
        """Tell the Dispatcher how parameter ``i``'s arguments of the type just classified are
        classified, and the stream getter that type implies."""
        c = self._classifiers[i]
        code, data = self._native_code(i, c[0], c[1])
        self._dispatcher.set_param(i, c[0], code, data)
        getter = self._implicit_stream
        self._dispatcher.set_stream_getter(getattr(getter, "__tylo_compose__", getter))

    def _native_code(self, i: int, t: type, classify):
        """``(code, data)``: which C classification computes what ``classify`` (``_classifier(i, .)``
        for arguments of type ``t``) returns; ``P_PYTHON`` calls ``classify`` itself."""
        n = self._native
        p = self.params[i]
        ann = p.annotation
        if p.constexpr:
            return n.P_CONSTEXPR, None
        if t is bool:
            return (n.P_FIXED, ("bool",)) if ann is None or ann == T.bool_ else (n.P_PYTHON, classify)
        if t is int:
            return (n.P_INT, None) if ann is None else (n.P_PYTHON, classify)
        if t is float:
            return (n.P_FIXED, ("f32",)) if ann is None else (n.P_PYTHON, classify)
        if hasattr(t, "__tylo_param__"):
            # frozen objects (TMA bindings) always describe themselves the same: memoised per object
            return n.P_BLOB, getattr(t, "__tylo_param_frozen__", False) is True
        from .runtime.arrays import native_array_access

        access = native_array_access(t)
        if access is None:
            return n.P_PYTHON, classify
        ptr, ptr_is_method, dtype_attr, names, must_be_true = access
        key_names = {dt: _PTR_NAME[name] for dt, name in names.items() if name in _PTR_NAME}
        want = _PTR_NAME[ann.elem.name] if isinstance(ann, PointerType) else None
        return n.P_ATTR_ARRAY, (ptr, dtype_attr, key_names, want, ptr_is_method, must_be_true)

    def _bind(self, args, kwargs):
        n = len(self.params)
        if not kwargs and len(args) == n:
            return args
        if len(args) > n:
            raise TypeError(f"{self.__name__}() takes {n} arguments but {len(args)} were given")
        full = list(args) + [_MISSING] * (n - len(args))
        for name, v in kwargs.items():
            i = self.index.get(name)
            if i is None:
                raise TypeError(f"{self.__name__}() got an unexpected argument '{name}'")
            if i < len(args):
                raise TypeError(f"{self.__name__}() got multiple values for argument '{name}'")
            full[i] = v
        for i, v in enumerate(full):
            if v is _MISSING:
                p = self.params[i]
                if p.default is _MISSING:
                    raise TypeError(f"{self.__name__}() is missing argument '{p.name}'")
                full[i] = p.default
        return full

    def _classifier(self, i: int, sample):
        """For parameter ``i`` and ``type(sample)``: ``classify(v) -> (key part, launch value or
        _MISSING)``, the launch fast path's cheap tuple, and ``to_spec(part, v)``, which turns that
        part into the parameter's typed record on a miss."""
        p = self.params[i]
        if p.constexpr:
            def constexpr(v):
                try:
                    hash(v)
                    return ("c", v), _MISSING
                except TypeError:
                    return ("c", repr(v)), _MISSING
            return constexpr, lambda part, v: ConstexprSpec(v)
        ann = p.annotation
        t = type(sample)
        if t is bool:
            if ann is not None and ann != T.bool_:
                return self._scalar_classifier(p, ann)
            return (lambda v: (("bool",), int(v))), lambda part, v: ScalarSpec("bool")
        if t is int:
            if ann is not None:
                return self._scalar_classifier(p, ann)

            def integer(v):
                ty = "i32" if -2147483648 <= v <= 2147483647 else T.int_type_for(v).name
                return (ty, v == 1, v % 16 == 0), v
            return integer, lambda part, v: IntSpec(part[0], part[1], part[2])
        if t is float:
            if ann is not None:
                return self._scalar_classifier(p, ann)
            return (lambda v: (("f32",), v)), lambda part, v: ScalarSpec("f32")
        if hasattr(t, "__tylo_param__"):
            return self._blob_classifier(p), lambda part, v: BlobSpec(part[1], part[2], part[3])
        from .runtime.arrays import array_extractor

        extract = array_extractor(t, sample)
        if extract is None:
            raise TypeError(f"{self.__name__}: argument '{p.name}' is a {t.__module__}.{t.__qualname__}; expected a "
                            f"device array (torch/cupy tensor, tylo.to_device(...), anything with "
                            f"__cuda_array_interface__ or __dlpack__), an int, a float or a bool")
        name = p.name
        kernel = self.__name__
        if ann is not None:
            if not isinstance(ann, PointerType):
                raise TypeError(f"{kernel}: argument '{name}' is annotated {ann} but got an array")
            want = ann.elem.name

            def typed_array(v):
                try:
                    ptr, dt = extract(v)
                except TypeError as exc:
                    raise TypeError(f"{kernel}: argument '{name}': {exc}") from None
                if dt != want:
                    raise TypeError(f"{kernel}: argument '{name}' is annotated Ptr[{want}] but the array holds {dt}")
                return (_PTR_NAME[dt], ptr & 15 == 0), ptr
            return typed_array, _pointer_spec

        def array(v):
            try:
                ptr, dt = extract(v)
            except TypeError as exc:
                raise TypeError(f"{kernel}: argument '{name}': {exc}") from None
            return (_PTR_NAME[dt], ptr & 15 == 0), ptr
        return array, _pointer_spec

    def _blob_classifier(self, p):
        """Objects passed by value as bytes (``__tylo_param__() -> (kind, *static, data)``)."""
        kernel = self.__name__

        def blob(v):
            kind, *static, data = v.__tylo_param__()
            try:
                static = tuple(static)
                hash(static)
            except TypeError:
                raise TypeError(f"{kernel}: argument '{p.name}': its static description is not hashable") from None
            return ("blob", kind, static, len(data)), bytes(data)
        return blob

    def _scalar_classifier(self, p, ann):
        kernel = self.__name__
        if isinstance(ann, PointerType):
            def bad(v):
                raise TypeError(f"{kernel}: argument '{p.name}' is annotated {ann} but got {type(v).__name__} {v!r}")
            return bad, None
        key = (ann.name,)
        record = ScalarSpec(ann.name)

        def scalar(v):
            if ann.is_int and isinstance(v, float):
                raise TypeError(f"{kernel}: argument '{p.name}' is annotated {ann} but got the float {v!r}")
            if ann.is_int or ann.is_bool:
                v = int(v)
                lo, hi = (-(1 << (ann.bits - 1)), 1 << (ann.bits - 1)) if ann.is_signed else (0, 1 << ann.bits)
                if not ann.is_bool and not lo <= v < hi:
                    raise TypeError(f"{kernel}: argument '{p.name}' = {v} does not fit in {ann}")
                return key, v
            if ann.name in ("f16", "bf16"):
                return key, _half_bits(float(v), ann.name)
            return key, float(v)
        return scalar, lambda part, v: record

    # -- compilation -------------------------------------------------------------------
    def _target_arch(self) -> str:
        if self._arch is None:
            from .runtime import driver

            self._arch = self.options.get("arch") or target_for_capability(*driver.compute_capability())
        return self._arch

    def _compile_for(self, key, full, block):
        arch = self._target_arch()
        # a miss: the classifiers that made this key turn its tuple parts into typed records
        spec = [c[2](part, v) for c, part, v in zip(self._classifiers, key[1:], full)]
        compiled = self._compile(spec, arch, maxntid=block)
        self._kernels[key] = compiled
        return compiled

    def compile(self, signature=None, arch: str | None = None, constexprs: dict | None = None, block=None):
        """Compile ahead of time (no GPU needed) and store in the cache.

        ``signature`` lists the non-constexpr parameters in order, in the grammar of
        ``tylo.specialization`` (``"*f32:16, *f32:16, i32:16, f32"``, or a list of entries, tylo types
        and TMA plans); ``constexprs`` gives every constexpr parameter's value; ``block`` sets
        ``maxntid``. A launch ``kernel[grid, block](...)`` is specialised on its block: give the same
        ``block`` (and the signature its arguments classify to) for the launch to hit this entry.
        ``arch`` defaults to the kernel's ``arch`` option, else sm_90a.
        """
        arch = arch or self.options.get("arch") or "sm_90a"
        get_target(arch)
        spec = self._spec_from_signature(signature, constexprs)
        return self._compile(spec, arch, maxntid=_dim3(block, "block") if block is not None else None)

    def lower(self, signature=None, arch: str | None = None, constexprs: dict | None = None, block=None,
              passes: bool = True):
        """The kernel's IR (``tylo.ir.Kernel``) after the passes (before them with ``passes=False``,
        to check the passes against it in the interpreter), for a signature: no LLVM, no cache."""
        from .frontend import generate_kernel
        from .ir import run_passes

        arch = arch or self.options.get("arch") or "sm_90a"
        get_target(arch)
        _, params = _describe_spec(self.params, self._spec_from_signature(signature, constexprs))
        kernel = generate_kernel(self.fn, self.fn.__name__, params, arch,
                                 _dim3(block, "block") if block is not None else None,
                                 debug=knobs.debug_enabled(self.options.get("debug")))
        return run_passes(kernel) if passes else kernel

    def _spec_from_signature(self, signature, constexprs):
        """Typed records for every parameter, from a signature and constexpr values."""
        constexprs = dict(constexprs or {})
        runtime_params = [p for p in self.params if not p.constexpr]
        if signature is not None:
            records = parse_signature(signature)
        else:
            records = [_annotation_spec(self.__name__, p) for p in runtime_params]
        if len(records) != len(runtime_params):
            names = ", ".join(p.name for p in runtime_params)
            raise TypeError(f"{self.__name__}: the signature has {len(records)} entries but the kernel has "
                            f"{len(runtime_params)} runtime parameters ({names})")
        spec = []
        it = iter(records)
        for p in self.params:
            if p.constexpr:
                if p.name in constexprs:
                    spec.append(ConstexprSpec(constexprs.pop(p.name)))
                elif p.default is not _MISSING:
                    spec.append(ConstexprSpec(p.default))
                else:
                    raise TypeError(f"{self.__name__}: constexpr parameter '{p.name}' needs a value")
                continue
            spec.append(_check_annotation(self.__name__, p, next(it)))
        if constexprs:
            raise TypeError(f"{self.__name__}: unknown constexpr parameter(s): {', '.join(constexprs)}")
        return spec

    def _dependencies(self):
        """The fingerprint of everything the compile reads, taken again for every compile: a
        helper edited and reloaded, or a global rebound or mutated, must never leave new code
        stored under the key of the old sources. In-memory specialisations compiled from other
        dependencies are dropped."""
        from .frontend.source import collect_dependencies

        deps = collect_dependencies(self.fn)
        if self._deps is not None and deps.texts != self._deps.texts:
            self._kernels.clear()
            self._launchers.clear()
        self._deps = deps
        if self._dispatcher is not None:
            self._dispatcher.forget()  # its remembered last key may name a launcher just dropped
            self._dispatcher.set_dependency_check(deps.is_current)
        return deps.texts

    def _check_dependencies(self):
        """Called on a launch when a global the kernel read was rebound (``C = 5``), a helper was
        reloaded or a global container changed: fingerprint again; recompile when it differs."""
        self._dependencies()

    def _compile(self, spec, arch, maxntid):

        target = get_target(arch)
        sig_text, params = _describe_spec(self.params, spec)
        constexprs = {p.name: repr(s.value) for p, s in zip(self.params, spec) if isinstance(s, ConstexprSpec)}
        # debug and lineinfo as compiled (option, else knob): both change the code, so both are in the key
        flags = {"debug": knobs.debug_enabled(self.options.get("debug")),
                 "lineinfo": knobs.lineinfo_enabled(self.options.get("lineinfo"))}
        components = {
            "tylo": _version, "tylo_sources": source_digest(), "toolchain": toolchain_versions(),
            "sources": self._dependencies(),
            "kernel": self.fn.__qualname__, "specialization": sig_text, "constexprs": constexprs,
            "target": arch, "options": {"maxntid": list(maxntid) if maxntid else None, **flags,
                                        **{k: repr(v) for k, v in sorted(self.options.items()) if k not in _FLAGS}},
        }
        key = cache_key(components)
        compiled = self._compile_or_load(key, components, spec, params, target, maxntid, sig_text, constexprs,
                                         flags)
        dump_folder = knobs.dump_folder()
        if dump_folder:
            _dump_artifacts(dump_folder, compiled)
        return compiled

    def _compile_or_load(self, key, components, spec, params, target, maxntid, sig_text, constexprs, flags):
        arch = target.name
        cache = default_cache()
        # TYLO_ALWAYS_COMPILE: never take a stored entry, still store what was built
        entry = None if knobs.always_compile() else cache.lookup(key, required=ARTIFACT_FILES)
        if entry is not None:
            meta = entry.meta

            res = Resources(**{k: meta.get(k, 0) for k in Resources.__dataclass_fields__})
            return CompiledKernel(
                name=self.fn.__name__, arch=arch, signature=sig_text, key=key, ir=entry.text("kernel.tyir"),
                llvm=entry.text("kernel.ll"), ptx=entry.text("kernel.ptx"), cubin=entry.read("kernel.cubin"),
                resources=res, shared_bytes=meta.get("dynamic_shared_bytes", 0),
                param_types=[s.param_type() for s in spec if not isinstance(s, ConstexprSpec)],
                compile_ms=meta.get("compile_ms", {}), from_cache=True)
        compiled = self._build(params, target, maxntid, sig_text, key, **flags)
        meta = {
            "key": key, "kernel": self.fn.__name__, "qualname": self.fn.__qualname__,
            "source_file": inspect.getsourcefile(self.fn), "source_line": self.fn.__code__.co_firstlineno,
            "arch": arch, "signature": sig_text, "constexprs": constexprs, **compiled.resources.as_dict(),
            "dynamic_shared_bytes": compiled.shared_bytes, "total_shared_bytes": compiled.total_shared_bytes,
            "cubin_bytes": len(compiled.cubin),
            "compile_ms": compiled.compile_ms, "created": time.time(), "tylo_version": _version,
            "maxntid": list(maxntid) if maxntid else None,
        }
        cache.store(key, meta, {"kernel.tyir": compiled.ir, "kernel.ll": compiled.llvm, "kernel.ptx": compiled.ptx,
                                "kernel.cubin": compiled.cubin})
        return compiled

    def _build(self, params, target, maxntid, sig_text, key, debug=False, lineinfo=False) -> CompiledKernel:
        from .codegen import llvm_to_ptx, lower_kernel, ptx_to_cubin
        from .codegen.compile import AssemblerError, LLVMFailure
        from .codegen.llvm import LoweringError, shared_memory_plan
        from .frontend import generate_kernel
        from .ir import print_kernel, run_passes

        times = {}
        t0 = time.perf_counter()
        kernel = generate_kernel(self.fn, self.fn.__name__, params, target.name, maxntid, debug=debug)
        t1 = time.perf_counter()
        _, shared = shared_memory_plan(kernel)
        _check_shared_arrays(kernel, target.name)
        run_passes(kernel)
        ir_text = print_kernel(kernel)
        t2 = time.perf_counter()
        try:
            llvm_ir = lower_kernel(kernel, target, lineinfo=lineinfo)
        except LoweringError as exc:
            raise _compile_error_at(exc.message, exc.loc) from exc
        try:  # past the frontend every failure is tylo's: say so, at the kernel's line
            ptx = llvm_to_ptx(llvm_ir, target)
            t3 = time.perf_counter()
            cubin, resources, _log = ptx_to_cubin(ptx, target, self.fn.__name__, lineinfo=lineinfo)
        except (LLVMFailure, AssemblerError) as exc:
            raise _compile_error_at(str(exc), kernel.loc) from exc
        t4 = time.perf_counter()
        times = {"frontend": (t1 - t0) * 1e3, "passes": (t2 - t1) * 1e3, "llvm": (t3 - t2) * 1e3,
                 "assemble": (t4 - t3) * 1e3, "total": (t4 - t0) * 1e3}
        static = int(getattr(resources, "shared_bytes", 0) or 0)
        if static + shared > _shared_limit(target.name):
            raise _compile_error_at(
                f"the kernel {self.fn.__name__} uses {static + shared:,} bytes of shared memory (static {static:,} + "
                f"dynamic {shared:,}); {target.name} allows at most {_shared_limit(target.name):,} bytes per block",
                kernel.loc, internal=False)
        return CompiledKernel(
            name=self.fn.__name__, arch=target.name, signature=sig_text, key=key, ir=ir_text, llvm=llvm_ir,
            ptx=ptx, cubin=cubin, resources=resources, shared_bytes=shared,
            param_types=[p.value.type for p in kernel.params], compile_ms=times)


_PTR_NAME = {name: "*" + name for name in T.SCALAR_TYPES}
_FLAGS = ("arch", "debug", "lineinfo")  # options that enter the key as compiled, not as given


def _implicit_stream_getter(classifiers):
    """The current-stream getter for a launch without ``stream=``: that of the first argument whose
    type belongs to torch or cupy (``runtime.streams.current_stream_getter``), or None."""
    from .runtime.streams import current_stream_getter

    for c in classifiers:
        if c is not None:
            getter = current_stream_getter(c[0])
            if getter is not None:
                return getter
    return None


def _dump_artifacts(folder: str, compiled: CompiledKernel) -> None:
    """``TYLO_DUMP=folder``: write the IR, LLVM and PTX of every kernel compiled or loaded.

    Files are named ``<kernel>.<arch>.<digest of the PTX>.<stage>`` so two runs of the same
    kernels can be compared file by file (``scripts/compare_dumps.py``)."""
    import hashlib

    os.makedirs(folder, exist_ok=True)
    digest = hashlib.sha256(compiled.ptx.encode()).hexdigest()[:16]
    stem = os.path.join(folder, f"{compiled.name}.{compiled.arch}.{digest}")
    for suffix, text in (("tyir", compiled.ir), ("ll", compiled.llvm), ("ptx", compiled.ptx)):
        with open(f"{stem}.{suffix}", "w") as f:
            f.write(text)


def _compile_error_at(message, loc, internal=True):
    """A CompileError at an IR op's source location (for failures after the frontend)."""
    import linecache

    from .frontend.errors import CompileError

    line = linecache.getline(loc.filename, loc.lineno) or None
    text = (f"internal compiler error (a bug in tylo, not in the kernel; please report it): {message}"
            if internal else message)
    if loc.inlined_at is not None:
        text += f" (inlined at {loc.inlined_at.line()})"
    return CompileError(text, loc.filename, loc.lineno, loc.col, line)


def _shared_limit(arch: str) -> int:
    """Shared memory one block may use on ``arch`` (static as nvJitLink reports it + dynamic)."""
    return resource_limits(arch).shared_bytes_per_block


def _check_shared_arrays(kernel, arch):
    """Before LLVM: the shared array that takes the kernel past the target's limit, at its line."""
    limit = _shared_limit(arch)
    allocs = {sym: (dtype, count, align) for sym, dtype, count, align in kernel.attrs.get("shared", [])}
    total = 0
    for op in kernel.walk():
        if op.name != "mem.shared_alloc" or op.attrs.get("symbol") not in allocs:
            continue
        dtype, count, align = allocs[op.attrs["symbol"]]
        total = -(-total // align) * align + count * dtype.itemsize
        if total > limit:
            raise _compile_error_at(
                f"this shared_array takes the kernel's shared memory to {total:,} bytes ({count:,} x {dtype}); "
                f"{arch} allows at most {limit:,} bytes per block", op.loc, internal=False)


def _pointer_spec(part, v):
    return PointerSpec(part[0][1:], part[1])


def _annotation_spec(kernel, p):
    """The record an annotated parameter gets when ``compile()`` is given no signature."""
    if p.annotation is None:
        raise TypeError(f"{kernel}: parameter '{p.name}' has no annotation; give a signature")
    if isinstance(p.annotation, PointerType):
        return PointerSpec(p.annotation.elem.name)
    return ScalarSpec(p.annotation.name)


def _check_annotation(kernel, p, record):
    """``record`` for parameter ``p``, checked against its annotation (launches specialise only
    unannotated integers, so an annotated one takes no ``:16`` / ``=1``)."""
    ann = p.annotation
    if ann is None:
        return record
    if isinstance(record, BlobSpec):
        raise TypeError(f"{kernel}: parameter '{p.name}' is annotated {ann}, signature says {record.text}")
    if record.param_type() != ann:
        raise TypeError(f"{kernel}: parameter '{p.name}' is annotated {ann}, signature says {record.text}")
    if isinstance(record, IntSpec):
        if record.one or record.div16:
            raise TypeError(f"{kernel}: parameter '{p.name}' is annotated {ann}: launches do not specialise it, "
                            f"so '{record.text}' would never be hit; write '{record.dtype}'")
        return ScalarSpec(record.dtype)
    return record


def _describe_spec(params, spec):
    """The signature text of a specialisation and the parameter bindings for the frontend."""
    bindings = [(p.name, ("constexpr", s.value) if isinstance(s, ConstexprSpec) else s.binding())
                for p, s in zip(params, spec)]
    return format_signature(spec), bindings


def _half_bits(value: float, name: str) -> int:
    import ml_dtypes
    import numpy as np

    dt = np.float16 if name == "f16" else ml_dtypes.bfloat16
    return int(np.array(value, dtype=dt).view(np.uint16))


def _resolve_annotation(text, fn):
    try:
        return eval(text, fn.__globals__)  # annotations are expressions of the kernel's module
    except Exception:
        raise TypeError(f"kernel {fn.__name__}: cannot resolve annotation {text!r}") from None


def jit(fn=None, **options):
    """Decorate a kernel: ``@tylo.jit`` or ``@tylo.jit(arch="sm_90a", debug=True, lineinfo=False)``.

    ``debug=True`` (or ``TYLO_DEBUG=1``) compiles ``tylo.device_assert`` and runtime ``assert``
    statements into checks that print file:line and the message and trap; off, they emit nothing.
    ``lineinfo`` (default on, ``TYLO_LINEINFO=0`` turns it off) puts the kernel's Python lines in
    the PTX and cubin for compute-sanitizer and Nsight Compute. See docs/knobs.md."""
    for name in ("debug", "lineinfo"):
        if name in options and not isinstance(options[name], bool):
            raise TypeError(f"@tylo.jit({name}=...) must be True or False, got {options[name]!r}")
    if fn is None:
        return lambda f: JITFunction(f, options=options)
    return JITFunction(fn, options=options)
