"""``@tylo.autotune``: pick the fastest of several configurations of a ``@tylo.jit`` kernel.

    @tylo.autotune(configs=[tylo.Config(constexprs={"BLOCK": 128}, block=128),
                            tylo.Config(constexprs={"BLOCK": 256}, block=256)],
                   key=["n"])
    @tylo.jit
    def scale(out, x, n, BLOCK: tylo.constexpr): ...

    scale[lambda meta: (tylo.cdiv(meta["n"], meta["BLOCK"]),)](out, x, n)

A configuration sets constexpr parameters, the block shape and the cluster shape. The first call
for a tuning key (the values of the ``key`` arguments, an array's dtype for an array, plus the
dtypes of every array argument) compiles every configuration, leaves out those that cannot run
(registers or shared memory over the target's limits, a block or cluster too large, the user's
``prune`` hook), times the others with ``tylo.testing.do_bench`` and keeps the fastest by median.
The choice and every configuration's timing are stored in the tylo cache folder
(``tylo.tuning_store``), so later processes reuse it without timing anything. A call then
launches the kernel with the chosen configuration: ``grid`` is a tuple or a function of
``meta``, a dict of the call's named arguments and the configuration's constexprs.

The module is ``autotuner``, not ``autotune``: the package exports the decorator as
``tylo.autotune``, which would hide a submodule of the same name.
"""
from __future__ import annotations

import hashlib
import inspect
import sys
import threading
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field

from .codegen.targets import resource_limits, target_for_capability
from .ir.types import ScalarType
from .knobs import print_autotuning
from .runtime.arrays import array_extractor
from .testing import do_bench
from .tuning_store import ConfigTiming, TunedRecord, clear_tuned, format_tuned, list_tuned, load_record, store_record

__all__ = ["Config", "autotune", "Autotuner", "AutotuneError", "AutotuneWarning", "target_for_capability",
           "tune_launches", "list_tuned", "clear_tuned", "format_tuned", "TunedRecord", "ConfigTiming"]

PROGRESS_AFTER_S = 1.0   # tuning prints progress on stderr once it has taken this long


class AutotuneError(RuntimeError):
    """No configuration could be timed (each failed to compile, did not fit, or was pruned)."""


class AutotuneWarning(UserWarning):
    """A configuration failed to compile or to run while tuning; it is skipped."""


class _FrozenDict(Mapping):
    """A read-only, hashable dict (a Config's constexprs)."""

    __slots__ = ("_items", "_hash")

    def __init__(self, items: Mapping):
        self._items = dict(items)
        self._hash = hash(tuple(sorted(self._items.items(), key=lambda kv: kv[0])))

    def __getitem__(self, k):
        return self._items[k]

    def __iter__(self):
        return iter(self._items)

    def __len__(self):
        return len(self._items)

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return isinstance(other, Mapping) and dict(self.items()) == dict(other.items())

    def __repr__(self):
        return repr(self._items)


def _shape3(x, what: str) -> tuple:
    if isinstance(x, int) and not isinstance(x, bool):
        t = (x,)
    else:
        try:
            t = tuple(x)
        except TypeError:
            raise TypeError(f"Config: {what} must be an int or a tuple of up to 3 ints, got {x!r}") from None
    if not 1 <= len(t) <= 3 or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in t):
        raise ValueError(f"Config: {what} must be 1 to 3 positive ints, got {x!r}")
    return t + (1,) * (3 - len(t))


@dataclass(frozen=True)
class Config:
    """One configuration: constexpr values, block shape, cluster shape (sm_90+), optional name.

    Hashable and comparable; ``repr`` is the text tuning results are stored under, so constexpr
    values should have a stable repr (ints, floats, strings, tylo dtypes)."""

    constexprs: Mapping = field(default_factory=dict)
    block: tuple = 128
    cluster: tuple | None = None
    name: str | None = None

    def __post_init__(self):
        if not isinstance(self.constexprs, Mapping):
            raise TypeError(f"Config: constexprs must be a dict of parameter name -> value, got {self.constexprs!r}")
        for k, v in self.constexprs.items():
            if not isinstance(k, str) or not k.isidentifier():
                raise TypeError(f"Config: constexpr names must be parameter names, got {k!r}")
            try:
                hash(v)
            except TypeError:
                raise TypeError(f"Config: constexpr {k}={v!r} is not hashable; use a tuple instead of a list") from None
        if self.name is not None and not isinstance(self.name, str):
            raise TypeError(f"Config: name must be a string, got {self.name!r}")
        object.__setattr__(self, "constexprs", _FrozenDict(self.constexprs))
        object.__setattr__(self, "block", _shape3(self.block, "block"))
        if self.cluster is not None:
            object.__setattr__(self, "cluster", _shape3(self.cluster, "cluster"))

    @property
    def threads(self) -> int:
        x, y, z = self.block
        return x * y * z

    @property
    def cluster_blocks(self) -> int:
        if self.cluster is None:
            return 1
        x, y, z = self.cluster
        return x * y * z

    def __repr__(self) -> str:
        block = self.block[0] if self.block[1:] == (1, 1) else self.block
        parts = [f"constexprs={dict(self.constexprs)!r}", f"block={block!r}"]
        if self.cluster is not None:
            parts.append(f"cluster={self.cluster!r}")
        if self.name is not None:
            parts.append(f"name={self.name!r}")
        return f"Config({', '.join(parts)})"

    @property
    def label(self) -> str:
        """A short text for progress lines: the name, else the constexprs and block."""
        if self.name is not None:
            return self.name
        cx = " ".join(f"{k}={v!r}" for k, v in self.constexprs.items())
        block = "x".join(str(b) for b in self.block).removesuffix("x1").removesuffix("x1")
        return f"{cx} block={block}" + (f" cluster={'x'.join(map(str, self.cluster))}" if self.cluster else "")


# ----------------------------------------------------------------- arguments

_SCALARS = (int, float, bool, str, type(None))


def _extractor(v):
    """``f(v) -> (pointer, dtype name)`` when ``v`` is a device array, else None."""
    t = type(v)
    return None if t in _SCALARS else array_extractor(t, v)


def _array_dtype(v) -> str | None:
    """The tylo dtype name of a device array argument, None for anything else."""
    extract = _extractor(v)
    return None if extract is None else extract(v)[1]


def _key_text(name: str, v) -> str:
    dt = _array_dtype(v)
    if dt is not None:
        return f"*{dt}"
    if v is None or isinstance(v, (bool, int, float, str)):
        return repr(v)
    if hasattr(v, "__tylo_param__"):
        kind, *static, _data = v.__tylo_param__()
        return f"{kind}{tuple(static)!r}"
    raise TypeError(f"autotune: key argument '{name}' is a {type(v).__name__}; a tuning key holds ints, floats, "
                    f"bools, strings or arrays (their dtype)")


class _BlobSignature:
    """A by-value argument (a TMA binding) as a signature entry for ``kernel.compile``."""

    def __init__(self, kind, static, nbytes):
        self._entry = ("blob", kind, static, nbytes)

    def __tylo_signature__(self):
        return self._entry


def _signature_entry(p, v):
    ann = getattr(p, "annotation", None)
    dt = _array_dtype(v)
    if dt is not None:
        ptr = _extractor(v)(v)[0]
        return f"*{dt}" + (":16" if ptr % 16 == 0 else "")
    if isinstance(ann, ScalarType):
        return ann.name
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):   # a launch specialises unannotated ints on % 16 == 0 too
        return ("i32" if -(1 << 31) <= v < 1 << 31 else "i64") + (":16" if v % 16 == 0 else "")
    if isinstance(v, float):
        return "f32"
    if hasattr(v, "__tylo_param__"):
        kind, *static, data = v.__tylo_param__()
        return _BlobSignature(kind, tuple(static), len(bytes(data)))
    raise TypeError(f"autotune: argument '{p.name}' is a {type(v).__name__}; cannot describe it for compilation")


def _device_buffer(v) -> tuple[int, int]:
    """(pointer, bytes spanned) of a device array."""
    from .runtime.arrays import describe_array, numpy_dtype

    info = describe_array(v)
    if any(n == 0 for n in info.shape):
        return info.ptr, 0
    span = 1 + sum((n - 1) * abs(s) for n, s in zip(info.shape, info.strides))
    return info.ptr, span * numpy_dtype(info.dtype_name).itemsize


# ------------------------------------------------------------------ progress

class _Progress:
    """Prints to stderr once tuning has taken more than PROGRESS_AFTER_S seconds (from the start with
    ``TYLO_PRINT_AUTOTUNING=1``)."""

    def __init__(self, title: str, clock, stream=None):
        self.title, self.clock = title, clock
        self.stream = stream if stream is not None else sys.stderr
        self.start = clock()
        self.verbose = print_autotuning()
        self.shown = False

    def elapsed(self) -> float:
        return self.clock() - self.start

    def step(self, text: str) -> None:
        if not self.shown and (self.verbose or self.elapsed() > PROGRESS_AFTER_S):
            self.shown = True
            print(f"tylo.autotune: tuning {self.title} ...", file=self.stream, flush=True)
        if self.shown:
            print(f"tylo.autotune:   {text} ({self.elapsed():.1f} s)", file=self.stream, flush=True)

    def finish(self, text: str) -> None:
        if self.shown or self.verbose or self.elapsed() > PROGRESS_AFTER_S:
            print(f"tylo.autotune: {self.title}: {text} after {self.elapsed():.1f} s", file=self.stream, flush=True)


def _report_stored(title: str, best: str) -> None:
    """``TYLO_PRINT_AUTOTUNING=1``: say which stored choice a tuning key uses (once per key and process)."""
    if print_autotuning():
        print(f"tylo.autotune: {title}: stored choice {best} (tylo cache list shows its timings)", file=sys.stderr,
              flush=True)


# ------------------------------------------------------------------ the tuner

class _TunedLaunch:
    __slots__ = ("tuner", "grid")

    def __init__(self, tuner, grid):
        self.tuner, self.grid = tuner, grid

    def __call__(self, *args, stream=None, **kwargs):
        return self.tuner._run(self.grid, args, kwargs, stream)


class Autotuner:
    """A ``@tylo.jit`` kernel with configurations to choose from: call ``tuned[grid](*args)``."""

    def __init__(self, kernel, configs, key, *, prune=None, warmup=25, rep=100, reset_to_zero=None,
                 restore_value=None, timer=None, clock=None, flush_l2=True, batch=1):
        if not (hasattr(kernel, "launch") and hasattr(kernel, "compile") and hasattr(kernel, "fn")):
            raise TypeError(f"@tylo.autotune goes on top of a @tylo.jit kernel, got {kernel!r}")
        self.kernel = kernel
        self.fn = kernel.fn
        self.__name__ = kernel.__name__
        self.__qualname__ = getattr(kernel, "__qualname__", kernel.__name__)
        self.__doc__ = kernel.__doc__
        self._signature = inspect.signature(kernel.fn)
        self._params = {p.name: p for p in kernel.params}
        self._names = [p.name for p in kernel.params]
        self.configs = self._check_configs(configs)
        self.key = self._check_names(key, "key")
        self.prune = prune
        if prune is not None and not callable(prune):
            raise TypeError(f"autotune: prune must be a function (configs, args) -> configs, got {prune!r}")
        self.warmup, self.rep = warmup, rep
        self.flush_l2, self.batch = flush_l2, batch
        self.reset_to_zero = self._check_names(reset_to_zero or [], "reset_to_zero")
        self.restore_value = self._check_names(restore_value or [], "restore_value")
        self.timer = timer
        self.clock = clock if clock is not None else time.monotonic
        self._tuned_names = set().union(*(c.constexprs for c in self.configs))
        self._best: dict[tuple, Config] = {}
        self._tuning_lock = threading.Lock()      # one thread tunes a key; the others wait for its choice
        # the launch fast path: positional calls, keyed by raw values (no reprs, no binding)
        self._positional = len(self._names) - len(self._tuned_names)
        self._fast_ok = all(n not in self._tuned_names for n in self._names[:self._positional])
        self._key_positions = frozenset(self._names.index(n) for n in self.key)
        self._classifiers: list = [None] * len(self._names)
        self._fast_best: dict[tuple, Config] = {}
        self.timings: dict[tuple, tuple] = {}     # tuning key -> ConfigTiming per config (this process)
        self._identity_cache: dict | None = None

    def __repr__(self):
        return f"<tylo autotuned kernel {self.__qualname__} ({len(self.configs)} configs, key={self.key})>"

    def __call__(self, *args, **kwargs):
        raise TypeError(f"launch the autotuned kernel {self.__name__} with {self.__name__}[grid](...); the block "
                        f"and constexprs come from the chosen Config")

    # -- checks -------------------------------------------------------------------------
    def _check_names(self, names, what):
        if isinstance(names, str):
            names = [names]
        names = list(names)
        for n in names:
            if n not in self._params:
                raise ValueError(f"autotune: {what} names '{n}', which is not a parameter of {self.__name__} "
                                 f"({', '.join(self._names)})")
        return names

    def _check_configs(self, configs):
        configs = list(configs)
        if not configs:
            raise ValueError("autotune: configs is empty; give at least one tylo.Config")
        for c in configs:
            if not isinstance(c, Config):
                raise TypeError(f"autotune: configs must be tylo.Config objects, got {c!r}")
            for name in c.constexprs:
                p = self._params.get(name)
                if p is None or not p.constexpr:
                    raise ValueError(f"autotune: {c!r} sets '{name}', which is not a tylo.constexpr parameter "
                                     f"of {self.__name__}")
        if len(set(configs)) != len(configs):
            raise ValueError("autotune: configs contains the same Config twice")
        return configs

    # -- launch ---------------------------------------------------------------------------
    def __getitem__(self, grid):
        return _TunedLaunch(self, grid)

    def launch(self, *args, grid, stream=None, **kwargs):
        """``tuned[grid](*args, stream=stream, **kwargs)`` as a method."""
        return self._run(grid, args, kwargs, stream)

    def best_config(self, *args, grid=None, stream=None, **kwargs) -> Config:
        """The Config chosen for these arguments: from this process, else from the stored results;
        tunes when neither has one and ``grid`` is given, else raises LookupError."""
        named = self._named(args, kwargs)
        tkey = self._tuning_key(named)
        config = self._lookup(tkey)
        if config is None:
            if grid is None:
                raise LookupError(f"{self.__name__} has not been tuned for {_key_display(tkey)}; launch it once "
                                  f"or pass grid= to best_config to tune now")
            with self._tuning_lock:
                config = self._lookup(tkey) or self._tune(tkey, grid, args, kwargs, named, stream)
        return config

    def _run(self, grid, args, kwargs, stream):
        fast = None
        if not kwargs and len(args) == self._positional and self._fast_ok:
            fast = self._fast_key(args)
            config = None if fast is None else self._fast_best.get(fast)
            if config is not None:
                g = grid({**dict(zip(self._names, args)), **config.constexprs._items}) if callable(grid) else grid
                return self.kernel.launch(*args, grid=g, block=config.block, cluster=config.cluster, stream=stream,
                                          **config.constexprs._items)
        named = self._named(args, kwargs)
        tkey = self._tuning_key(named)
        config = self._best.get(tkey)
        if config is None:
            with self._tuning_lock:
                config = self._lookup(tkey) or self._tune(tkey, grid, args, kwargs, named, stream)
        if fast is not None:
            self._fast_best[fast] = config
        return self._launch(config, grid, args, kwargs, named, stream)

    def _fast_key(self, args) -> tuple | None:
        """The tuning key of a positional call as raw values: a key argument's (type, value) or an
        array's dtype, then every array's dtype. Equal raw keys give equal tuning keys."""
        parts = []
        classifiers = self._classifiers
        keys = self._key_positions
        for i, v in enumerate(args):
            c = classifiers[i]
            if c is None or c[0] is not type(v):
                c = classifiers[i] = (type(v), _extractor(v))
            if c[1] is not None:
                parts.append(c[1](v)[1])
            elif i in keys:
                if c[0] not in _SCALARS:
                    return None      # a by-value object (a TMA binding): the slow path describes it
                parts.append((c[0], v))
        return tuple(parts)

    def _launch(self, config, grid, args, kwargs, named, stream):
        return self.kernel.launch(*args, grid=self._grid(grid, config, named), block=config.block,
                                  cluster=config.cluster, stream=stream, **kwargs, **config.constexprs._items)

    def _grid(self, grid, config, named):
        if callable(grid):
            return grid({**named, **config.constexprs._items})
        return grid

    def _named(self, args, kwargs) -> dict:
        """Argument name -> value for the call (defaults filled in), without the tuned constexprs."""
        for name in kwargs:
            if name in self._tuned_names:
                raise TypeError(f"{self.__name__}: '{name}' is chosen by the autotuner's configs; do not pass it")
        if not kwargs and len(args) == len(self._names) - len(self._tuned_names) and not any(
                n in self._tuned_names for n in self._names[:len(args)]):
            named = dict(zip(self._names, args))
        else:
            try:
                bound = self._signature.bind_partial(*args, **kwargs)
            except TypeError as exc:
                raise TypeError(f"{self.__name__}: {exc}") from None
            named = dict(bound.arguments)
        for name in named:
            if name in self._tuned_names:
                raise TypeError(f"{self.__name__}: '{name}' is chosen by the autotuner's configs; do not pass it")
        for name in self._names:
            if name not in named and name not in self._tuned_names:
                default = self._signature.parameters[name].default
                if default is inspect.Parameter.empty:
                    raise TypeError(f"{self.__name__}() is missing argument '{name}'")
                named[name] = default
        return named

    def _tuning_key(self, named) -> tuple:
        parts = [(name, _key_text(name, named[name])) for name in self.key]
        dtypes = [_array_dtype(named[n]) for n in self._names if n in named]
        parts.append(("dtypes", ",".join(d for d in dtypes if d is not None)))
        return tuple(parts)

    # -- persistence ----------------------------------------------------------------------
    def _identity(self) -> dict:
        """Fingerprint of the kernel's sources, device and target (cached for the process)."""
        if self._identity_cache is None:
            from .frontend.source import dependency_sources

            sources = "\0".join(dependency_sources(self.fn))
            fingerprint = hashlib.sha256(f"{self.fn.__qualname__}\0{sources}".encode()).hexdigest()
            arch, device = self._target()
            configs = hashlib.sha256("\n".join(repr(c) for c in self.configs).encode()).hexdigest()
            self._identity_cache = {"fingerprint": fingerprint, "arch": arch, "device": device,
                                    "configs": configs, "regime": [self.flush_l2, self.batch]}
        return self._identity_cache

    def _target(self) -> tuple[str, str]:
        return _device_target(getattr(self.kernel, "options", {}).get("arch"), f"autotune {self.__name__}")

    def _record_identity(self, tkey) -> dict:
        return {**self._identity(), "key": [list(kv) for kv in tkey]}

    def _lookup(self, tkey) -> Config | None:
        config = self._best.get(tkey)
        if config is not None:
            return config
        if len(self.configs) == 1:
            self._best[tkey] = self.configs[0]
            return self.configs[0]
        record = load_record(self._record_identity(tkey))
        if record is None:
            return None
        config = next((c for c in self.configs if repr(c) == record.best), None)
        if config is not None:
            self._best[tkey] = config
            self.timings[tkey] = record.timings
            _report_stored(f"{self.__name__} [{_key_display(tkey)}]", config.label)
        return config

    # -- tuning ---------------------------------------------------------------------------
    def _tune(self, tkey, grid, args, kwargs, named, stream) -> Config:
        identity = self._identity()
        arch = identity["arch"]
        progress = _Progress(f"{self.__name__} [{_key_display(tkey)}] over {len(self.configs)} configs", self.clock)
        outcome: dict[Config, ConfigTiming] = {}
        candidates = self._user_pruned(named, outcome)
        candidates = self._statically_pruned(candidates, arch, outcome)
        compiled, resources = [], {}
        for i, config in enumerate(candidates):
            rejected, resources[config] = self._compile_and_fit(config, named, arch)
            if rejected is None:
                compiled.append(config)
            else:
                outcome[config] = rejected
            progress.step(f"compiled {i + 1}/{len(candidates)}: {config.label}")
        saved = self._save_values(named)
        try:
            for i, config in enumerate(compiled):
                outcome[config] = self._bench(config, grid, args, kwargs, named, stream, resources[config])
                t = outcome[config]
                shown = f"{t.median_ms:.4f} ms" if t.status == "ok" else t.status
                progress.step(f"timed {i + 1}/{len(compiled)}: {config.label}: {shown}")
                self._restore_values(saved)
        finally:
            self._free_values(saved)
        timings = tuple(outcome[c] for c in self.configs)
        ok = [(t.median_ms, i) for i, t in enumerate(timings) if t.status == "ok"]
        if not ok:
            why = "\n".join(f"  {t.config}: {t.status}: {t.reason}" for t in timings)
            raise AutotuneError(f"autotune {self.__name__} [{_key_display(tkey)}]: no configuration could be "
                                f"timed:\n{why}")
        best = self.configs[min(ok)[1]]
        self._best[tkey] = best
        self.timings[tkey] = timings
        store_record(self._record_identity(tkey), kernel=self.fn.__qualname__, key=tkey, best=repr(best),
                     timings=timings, device=identity["device"], arch=arch, fingerprint=identity["fingerprint"])
        progress.finish(f"best {best.label} ({outcome[best].median_ms:.4f} ms)")
        return best

    def _user_pruned(self, named, outcome) -> list:
        if self.prune is None:
            return list(self.configs)
        kept = self.prune(list(self.configs), dict(named))
        try:
            kept = list(kept)
        except TypeError:
            raise TypeError(f"autotune {self.__name__}: prune must return a list of Configs, got {kept!r}") from None
        unknown = [c for c in kept if c not in self.configs]
        if unknown:
            raise ValueError(f"autotune {self.__name__}: prune returned configs that are not among the kernel's "
                             f"configs: {unknown!r}")
        for c in self.configs:
            if c not in kept:
                outcome[c] = ConfigTiming(repr(c), "pruned", "removed by the prune hook")
        return [c for c in self.configs if c in kept]

    def _statically_pruned(self, candidates, arch, outcome) -> list:
        limits = resource_limits(arch)
        kept = []
        for c in candidates:
            if c.threads > limits.threads_per_block:
                outcome[c] = ConfigTiming(repr(c), "pruned", f"block of {c.threads} threads; {arch} allows "
                                                             f"{limits.threads_per_block}")
            elif c.cluster_blocks > limits.cluster_blocks:
                outcome[c] = ConfigTiming(repr(c), "pruned", f"cluster of {c.cluster_blocks} blocks; {arch} "
                                                             f"allows {limits.cluster_blocks}")
            else:
                kept.append(c)
        return kept

    def _compile_and_fit(self, config, named, arch) -> tuple[ConfigTiming | None, dict]:
        """Compile ``config`` for these arguments: (a ConfigTiming when it fails or cannot fit, else
        None; its registers, spills and shared memory)."""
        signature, constexprs = [], {}
        for name in self._names:
            p = self._params[name]
            if p.constexpr:
                if name not in self._tuned_names:
                    constexprs[name] = named[name]
            else:
                signature.append(_signature_entry(p, named[name]))
        constexprs.update(config.constexprs)
        try:
            ck = self.kernel.compile(signature, arch=arch, constexprs=constexprs, block=config.block)
        except Exception as exc:   # a config that does not compile is reported and skipped
            first = _first_line(exc)
            warnings.warn(f"autotune {self.__name__}: {config!r} does not compile, skipped: {first}",
                          AutotuneWarning, stacklevel=4)
            return ConfigTiming(repr(config), "failed", f"does not compile: {first}"), {}
        res = ck.resources
        limits = resource_limits(arch)
        static = max(0, int(res.shared_bytes) - limits.reserved_shared_bytes)
        shared = static + int(ck.shared_bytes)   # tylo allocates shared memory dynamically: ck.shared_bytes
        info = {"registers": int(res.registers), "spill_bytes": int(res.spill_bytes), "shared_bytes": shared}
        used = limits.registers_used(res.registers, config.threads)
        if used > limits.registers_per_block:
            return ConfigTiming(repr(config), "pruned", f"{res.registers} registers x {config.threads} threads "
                                f"need {used} registers; an SM has {limits.registers_per_block}", **info), info
        if shared > limits.shared_bytes_per_block:
            return ConfigTiming(repr(config), "pruned", f"{shared} bytes of shared memory; {arch} allows "
                                f"{limits.shared_bytes_per_block} per block", **info), info
        return None, info

    def _bench(self, config, grid, args, kwargs, named, stream, info) -> ConfigTiming:
        from .runtime.streams import stream_handle

        g = self._grid(grid, config, named)
        zero = [_device_buffer(named[n]) for n in self.reset_to_zero]
        handle = stream_handle(stream) if zero else 0

        def call():
            if zero:
                from .runtime import events

                for ptr, nbytes in zero:
                    events.memset_d8_async(ptr, 0, nbytes, handle)
            self.kernel.launch(*args, grid=g, block=config.block, cluster=config.cluster, stream=stream,
                               **kwargs, **config.constexprs)
        try:
            r = do_bench(call, self.warmup, self.rep, stream=stream, timer=self.timer, flush_l2=self.flush_l2,
                         batch=self.batch)
        except Exception as exc:
            first = _first_line(exc)
            warnings.warn(f"autotune {self.__name__}: {config!r} failed to run, skipped: {first}",
                          AutotuneWarning, stacklevel=4)
            return ConfigTiming(repr(config), "failed", f"does not run: {first}", **info)
        return ConfigTiming(repr(config), "ok", "", r.median_ms, r.quantiles, r.mean_ms, r.min_ms, r.n, **info)

    # -- restore_value and reset_to_zero arguments are saved before tuning and restored after each
    # -- configuration: the tuning runs leave no trace, the call's own launch sees the caller's values
    def _save_values(self, named) -> list:
        names = list(dict.fromkeys(self.restore_value + self.reset_to_zero))
        if not names:
            return []
        from .runtime import driver

        driver.synchronize()
        saved = []
        for name in names:
            ptr, nbytes = _device_buffer(named[name])
            copy = driver.mem_alloc(nbytes)
            driver.memcpy_dtod(copy, ptr, nbytes)
            saved.append((ptr, copy, nbytes))
        return saved

    def _restore_values(self, saved) -> None:
        if not saved:
            return
        from .runtime import driver

        driver.synchronize()
        for ptr, copy, nbytes in saved:
            driver.memcpy_dtod(ptr, copy, nbytes)
        driver.synchronize()

    def _free_values(self, saved) -> None:
        if saved:
            from .runtime import driver

            for _ptr, copy, _n in saved:
                driver.mem_free(copy)


def _first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type's name when it has none): what a skipped
    configuration's warning and record say."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _device_target(arch, who) -> tuple[str, str]:
    """(target arch, device name) of the current device; ``arch`` overrides the device's target."""
    from .runtime import driver

    if not driver.gpu_available():
        if arch is None:
            raise RuntimeError(f"{who}: no GPU here and the kernel names no arch (@tylo.jit(arch=...)); cannot tune")
        return arch, "no GPU"
    ordinal = driver.current_device()
    if arch is None:
        arch = target_for_capability(*driver.compute_capability(ordinal))
    names = [d["name"] for d in driver.devices() if d["ordinal"] == ordinal]
    return arch, names[0] if names else f"device {ordinal}"


# ------------------------------------------------------------ choosing among ready launches

_CHOSEN: dict[str, str] = {}      # record identity -> chosen label, for the process
_CHOSEN_LOCK = threading.Lock()


def tune_launches(name, key, candidates, *, source="", warmup=25, rep=100, flush_l2=True, batch=1, stream=None,
                  target=None, timer=None, clock=None, lazy=False) -> str:
    """The label of the fastest of ``candidates`` (label -> a function of no arguments that queues one run of the
    computation on ``stream``), timed with ``do_bench`` on the first call for ``key`` and stored in the tylo cache
    like ``autotune``'s results (``tylo cache list`` shows them under ``name``).

    ``autotune`` tunes one kernel's constexprs, block and cluster; this chooses among launches whose host side
    differs too (other TMA descriptors, grids, workspaces or kernels), each prepared by the caller.
    ``key``: ((name, value text), ...), what selects a stored result. ``source``: text whose change invalidates
    stored results (the kernel's sources); the labels are part of the identity too, so another candidate list is
    tuned again. Ties keep the earlier candidate: put the default first. A candidate that raises is reported
    (``AutotuneWarning``) and skipped; none left raises ``AutotuneError``. ``flush_l2``/``batch``: do_bench's,
    as for ``autotune``. ``target``: (arch, device name)
    instead of the current device's (tests); ``timer``/``clock`` as for ``autotune``.

    ``lazy=True``: each value is instead a function of no arguments that prepares the candidate (compiles its
    kernel, builds its descriptors) and returns its launch function, or None where the candidate does not apply;
    it is called only when the candidates are timed, so a stored result prepares nothing."""
    if not isinstance(candidates, Mapping) or not candidates:
        raise ValueError(f"tune_launches {name}: candidates must be a non-empty dict of label -> function")
    for label, fn in candidates.items():
        if not isinstance(label, str) or not callable(fn):
            raise TypeError(f"tune_launches {name}: candidates maps string labels to functions, got {label!r}: "
                            f"{fn!r}")
    key = tuple((str(k), str(v)) for k, v in key)
    labels = list(candidates)
    arch, device = target if target is not None else _device_target(None, f"tune_launches {name}")
    fingerprint = hashlib.sha256(f"{name}\0{source}".encode()).hexdigest()
    identity = {"fingerprint": fingerprint, "arch": arch, "device": device, "key": [list(kv) for kv in key],
                "configs": hashlib.sha256("\n".join(labels).encode()).hexdigest(), "regime": [flush_l2, batch]}
    memo = repr(sorted(identity.items()))
    with _CHOSEN_LOCK:
        best = _CHOSEN.get(memo)
        if best is None:
            record = load_record(identity)
            best = record.best if record is not None and record.best in candidates else None
            if best is not None:
                _report_stored(f"{name} [{_key_display(key)}]", best)
        if best is None:
            if lazy:
                candidates = _prepare_candidates(name, candidates)
            best = _time_launches(name, key, candidates, identity, (warmup, rep, flush_l2, batch), stream, timer,
                                  clock)
        _CHOSEN[memo] = best
    return best


def _prepare_candidates(name, factories):
    """label -> launch function from ``tune_launches``' lazy candidates (label -> preparer), leaving out those
    whose preparer returns None (not applicable here)."""
    prepared = {}
    for label, factory in factories.items():
        launch = factory()
        if launch is not None:
            if not callable(launch):
                raise TypeError(f"tune_launches {name}: the preparer of {label} returned {launch!r}, not a function")
            prepared[label] = launch
    if not prepared:
        raise AutotuneError(f"tune_launches {name}: no candidate applies (every preparer returned None)")
    return prepared


def _time_launches(name, key, candidates, identity, budget, stream, timer, clock) -> str:
    warmup, rep, flush_l2, batch = budget
    progress = _Progress(f"{name} [{_key_display(key)}] over {len(candidates)} candidates",
                         clock if clock is not None else time.monotonic)
    timings = []
    for i, (label, fn) in enumerate(candidates.items()):
        try:
            r = do_bench(fn, warmup, rep, flush_l2=flush_l2, stream=stream, timer=timer, batch=batch)
            timings.append(ConfigTiming(label, "ok", "", r.median_ms, r.quantiles, r.mean_ms, r.min_ms, r.n))
        except Exception as exc:     # a candidate that cannot run is reported and skipped
            first = _first_line(exc)
            warnings.warn(f"tune_launches {name}: {label} failed to run, skipped: {first}", AutotuneWarning,
                          stacklevel=4)
            timings.append(ConfigTiming(label, "failed", f"does not run: {first}"))
        t = timings[-1]
        progress.step(f"timed {i + 1}/{len(candidates)}: {label}: "
                      f"{f'{t.median_ms:.4f} ms' if t.status == 'ok' else t.status}")
    ok = [(t.median_ms, i) for i, t in enumerate(timings) if t.status == "ok"]
    if not ok:
        why = "\n".join(f"  {t.config}: {t.reason}" for t in timings)
        raise AutotuneError(f"tune_launches {name} [{_key_display(key)}]: no candidate could be timed:\n{why}")
    best = timings[min(ok)[1]]
    store_record(identity, kernel=name, key=key, best=best.config, timings=tuple(timings),
                 device=identity["device"], arch=identity["arch"], fingerprint=identity["fingerprint"])
    progress.finish(f"best {best.config} ({best.median_ms:.4f} ms)")
    return best.config


def _key_display(tkey) -> str:
    return ", ".join(f"{k}={v}" for k, v in tkey if not (k == "dtypes" and not v))


def autotune(configs, key, *, prune=None, warmup=25, rep=100, reset_to_zero=None, restore_value=None,
             timer=None, clock=None, flush_l2=True, batch=1):
    """Decorate a ``@tylo.jit`` kernel with configurations to tune over (see the module doc).

    ``key``: names of arguments whose values (an array's dtype for arrays) select a tuning result.
    ``prune(configs, args) -> configs``: drop configurations before compiling (``args`` maps
    argument names to values). ``warmup``/``rep``: do_bench's budgets in milliseconds.
    ``reset_to_zero``: arguments (device arrays) zeroed before every timed call (the memset is
    inside the timing, as in Triton), for kernels that accumulate into their output;
    ``restore_value``: arguments overwritten by the kernel in place. Both are copied before tuning
    and restored after each configuration, so the tuning call's own launch sees the caller's values.
    ``timer``/``clock``: a do_bench Timer and a seconds clock for the progress messages, for tests.
    ``flush_l2``/``batch``: do_bench's (cold L2 by default; ``flush_l2=False, batch=10`` times the warm
    back-to-back regime of a kernel run in a loop).
    """
    def decorate(kernel):
        return Autotuner(kernel, configs, key, prune=prune, warmup=warmup, rep=rep, reset_to_zero=reset_to_zero,
                         restore_value=restore_value, timer=timer, clock=clock, flush_l2=flush_l2, batch=batch)
    return decorate
