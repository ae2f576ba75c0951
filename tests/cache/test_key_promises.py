"""The cache key is a promise: everything a kernel's compile reads is in it (checked in fresh
processes), and a global rebound or a helper reloaded in a running process recompiles instead of
running (or storing) stale code."""
import importlib
import json
import os
import subprocess
import sys
import textwrap

import pytest

import tylo
from tylo.frontend.errors import CompileError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

HOLES = '''
import numpy as np
import tylo
import mathparams

CFG = {{"scale": {scale}}}
NP_N = np.int64({npn})


@tylo.func
def bump(v):
    return v + {bump}


HELPERS = {{"f": bump}}


class Config:
    def __init__(self, k):
        self.k = k

    def factor(self):
        return self.k


cfg = Config({k})
G = {g}


@tylo.jit
def k_dict(out):
    out[0] = 1.0 * CFG["scale"]


@tylo.jit
def k_numpy_int(out):
    if NP_N > 2:
        out[0] = 1.0
    else:
        out[0] = 2.0


@tylo.jit
def k_math_named_module(out):
    out[0] = 1.0 * mathparams.SCALE


@tylo.jit
def k_helper_in_dict(out):
    out[0] = HELPERS["f"](2.0)


@tylo.jit
def k_config_method(out):
    out[0] = 1.0 * cfg.factor()


@tylo.jit
def k_global_before_local(out):
    x = G * 1.0
    G = 7
    out[0] = x + G
'''

KERNELS = ["k_dict", "k_numpy_int", "k_math_named_module", "k_helper_in_dict", "k_config_method",
           "k_global_before_local"]

DRIVER = '''
import json, sys
sys.path.insert(0, sys.argv[1])
import holes
out = {}
for name in sys.argv[2].split(","):
    ck = getattr(holes, name).compile(signature="*f32", arch="sm_80")
    out[name] = [ck.key, ck.from_cache, ck.ptx]
print(json.dumps(out))
'''


def _write(folder, **values):
    folder.mkdir(exist_ok=True)
    (folder / "holes.py").write_text(HOLES.format(**values))
    (folder / "mathparams.py").write_text(f"SCALE = {values['mscale']}\n")
    return folder


def _run(folder, cache):
    env = dict(os.environ, TYLO_CACHE_DIR=str(cache), PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-c", DRIVER, str(folder), ",".join(KERNELS)], env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_value_a_compile_reads_is_in_the_key_across_processes(tmp_path):
    cache = tmp_path / "cache"
    a = dict(scale=2, npn=3, bump="1.0", k=2, g=2, mscale=2)
    b = dict(scale=3, npn=1, bump="2.0", k=3, g=3, mscale=3)
    first = _run(_write(tmp_path / "a", **a), cache)
    again = _run(_write(tmp_path / "a", **a), cache)
    changed = _run(_write(tmp_path / "a", **b), cache)
    for name in KERNELS:
        assert not first[name][1]
        assert again[name][0] == first[name][0] and again[name][1], name          # stable: a hit
        assert changed[name][0] != first[name][0], f"{name}: the edited value did not change the key"
        assert not changed[name][1], name
        assert changed[name][2] != first[name][2], f"{name}: the edit should change the code"


@pytest.fixture(autouse=True)
def _importable_tmp_path(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)   # reloads must read the edited files


def _module(tmp_path, name, text):
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
    sys.modules.pop(name, None)
    importlib.invalidate_caches()
    return importlib.import_module(name)


def test_a_global_without_a_stable_text_form_is_refused_with_a_hint(tmp_path):
    mod = _module(tmp_path, "unkeyable_mod", '''
        import threading
        import tylo

        LOCK = threading.Lock()

        @tylo.jit
        def k(out):
            out[0] = 1.0 if LOCK else 2.0
    ''')
    with pytest.raises(CompileError) as info:
        mod.k.compile(signature="*f32", arch="sm_80")
    msg = str(info.value)
    assert "unkeyable_mod.py:9" in msg and "'LOCK'" in msg and "tylo.constexpr" in msg


def test_a_rebound_global_recompiles_under_a_new_key(tmp_path):
    mod = _module(tmp_path, "rebind_mod", '''
        import tylo

        C = 3

        @tylo.jit
        def k(out):
            out[0] = 1.0 * C
    ''')
    first = mod.k.compile(signature="*f32", arch="sm_80")
    mod.C = 5
    second = mod.k.compile(signature="*f32", arch="sm_80")
    assert second.key != first.key and str(0x40A00000) in second.ptx       # stores 5.0f
    mod.C = 3.0          # equal to 3, but a float: another key, not the int's entry
    third = mod.k.compile(signature="*f32", arch="sm_80")
    assert third.key not in (first.key, second.key)


class FakeLauncher:
    def __init__(self, compiled):
        self.compiled = compiled
        self.calls = 0

    def launch(self, *args):
        self.calls += 1


class FakeArray:
    def __init__(self, address=0x7F0000000000):
        self.address = address

    @property
    def __cuda_array_interface__(self):
        return {"shape": (4,), "typestr": "<f4", "data": (self.address, False), "version": 3, "strides": None}


@pytest.fixture
def fake_launch(monkeypatch):
    """Launches that compile for real (sm_80) and record the compiled kernel instead of calling a GPU."""
    built = []
    real_build = tylo.JITFunction._build

    def counting_build(self, *a, **k):
        built.append(self.__name__)
        return real_build(self, *a, **k)

    monkeypatch.setattr(tylo.JITFunction, "_build", counting_build)
    monkeypatch.setattr(tylo.CompiledKernel, "launcher", property(lambda self: FakeLauncher(self)))
    return built


def test_a_rebound_global_or_reloaded_helper_is_seen_by_the_launch(tmp_path, fake_launch):
    helper = _module(tmp_path, "reload_helper_mod", '''
        import tylo

        @tylo.func
        def twice(v):
            return v + v
    ''')
    mod = _module(tmp_path, "reload_kernel_mod", '''
        import tylo
        import reload_helper_mod

        C = 3

        @tylo.jit(arch="sm_80")
        def k(out):
            out[0] = reload_helper_mod.twice(1.0) * C
    ''')
    out = FakeArray()
    mod.k[1, 32](out)
    mod.k[1, 32](out)
    assert fake_launch == ["k"]                         # the second launch is a hit
    first = next(iter(mod.k._kernels.values()))
    mod.C = 5
    mod.k[1, 32](out)
    assert fake_launch == ["k", "k"]                    # rebinding C recompiles
    second = next(iter(mod.k._kernels.values()))
    assert second.key != first.key
    (tmp_path / "reload_helper_mod.py").write_text(textwrap.dedent('''
        import tylo

        @tylo.func
        def twice(v):
            return v * 3.0
    '''))
    importlib.reload(helper)
    mod.k[1, 32](out)
    assert fake_launch == ["k", "k", "k"]               # the reloaded helper recompiles
    third = next(iter(mod.k._kernels.values()))
    assert third.key != second.key and third.ptx != second.ptx
    mod.k[1, 32](out)
    assert fake_launch == ["k", "k", "k"]


def test_a_mutated_global_dict_is_seen_by_the_launch(tmp_path, fake_launch):
    mod = _module(tmp_path, "mutate_mod", '''
        import tylo

        CFG = {"scale": 2}

        @tylo.jit(arch="sm_80")
        def k(out):
            out[0] = 1.0 * CFG["scale"]
    ''')
    out = FakeArray()
    mod.k[1, 32](out)
    mod.CFG["scale"] = 4
    mod.k[1, 32](out)
    assert fake_launch == ["k", "k"]


def test_new_code_is_never_stored_under_the_old_key(tmp_path):
    """A helper edited and reloaded between two compiles of other specialisations: the second
    entry's key is the one a fresh process computes for the edited sources."""
    helper = _module(tmp_path, "poison_helper_mod", '''
        import tylo

        @tylo.func
        def f(v):
            return v + 1.0
    ''')
    mod = _module(tmp_path, "poison_kernel_mod", '''
        import tylo
        import poison_helper_mod

        @tylo.jit
        def k(out, x):
            out[0] = poison_helper_mod.f(x[0])
    ''')
    mod.k.compile(signature="*f32, *f32", arch="sm_80")
    edited = tmp_path / "poison_helper_mod.py"
    edited.write_text(textwrap.dedent('''
        import tylo

        @tylo.func
        def f(v):
            return v + 2.0
    '''))
    # an edit the file system registers: the same size within one timestamp tick would look unchanged to
    # Python's bytecode cache and to linecache (both compare size and mtime), so reload would keep the old code
    st = edited.stat()
    os.utime(edited, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    importlib.reload(helper)
    in_process = mod.k.compile(signature="*f16, *f16", arch="sm_80")
    driver = ("import sys; sys.path.insert(0, sys.argv[1]); import poison_kernel_mod as m; "
              "print(m.k.compile(signature='*f16, *f16', arch='sm_80').key)")
    env = dict(os.environ, PYTHONPATH=ROOT)
    fresh = subprocess.run([sys.executable, "-c", driver, str(tmp_path)], env=env, capture_output=True,
                           text=True, check=True).stdout.strip().splitlines()[-1]
    assert in_process.key == fresh


def test_a_changed_copy_of_tylo_has_another_source_digest(tmp_path):
    """The version string alone does not name the compiler: any edit of tylo's sources changes keys."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(os.path.join(ROOT, "tylo"), copy / "tylo", ignore=shutil.ignore_patterns("__pycache__"))
    probe = "from tylo._version import source_digest, __version__; print(__version__, source_digest())"

    def digest():
        env = dict(os.environ, PYTHONPATH=str(copy))
        return subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, cwd=copy,
                              check=True).stdout.split()

    version, before = digest()
    assert before == tylo._version.source_digest() and version == tylo.__version__
    with open(copy / "tylo" / "ir" / "passes.py", "a") as f:
        f.write("\n# a wrong-code fix\n")
    assert digest()[1] != before


def test_the_key_holds_the_source_digest(monkeypatch):
    jit_module = sys.modules["tylo.jit"]

    @tylo.jit
    def k(out):
        out[0] = 1.0

    first = k.compile(signature="*f32", arch="sm_80")
    monkeypatch.setattr(jit_module, "source_digest", lambda: "0" * 64)
    assert k.compile(signature="*f32", arch="sm_80").key != first.key


def test_fingerprints_of_values_and_the_launch_check(tmp_path):
    """Unit level: each kind of global value changes the fingerprint when it changes, and
    is_current() sees rebinding and shallow mutation (classes, objects, lists)."""
    from tylo.frontend.source import collect_dependencies

    mod = _module(tmp_path, "values_mod", '''
        import enum
        import functools
        import numpy as np
        import tylo

        class Mode(enum.Enum):
            FAST = 1
            SLOW = 2

        class Consts:
            SCALE = 2

        def scaled(v, k):
            return v * k

        LUT = np.arange(8, dtype=np.float32)
        MODE = Mode.FAST
        TWICE = functools.partial(scaled, k=2)
        SIZES = [1, 2]

        @tylo.jit
        def k(out):
            if MODE == Mode.FAST:
                out[0] = 1.0 * LUT[3] + Consts.SCALE + TWICE(1) + SIZES[0]
    ''')
    deps = collect_dependencies(mod.k.fn)
    assert deps.is_current()
    changes = [("LUT", lambda: mod.LUT.__setitem__(3, 9.0)), ("MODE", lambda: setattr(mod, "MODE", mod.Mode.SLOW)),
               ("TWICE", lambda: setattr(mod, "TWICE", mod.functools.partial(mod.scaled, k=3))),
               ("Consts", lambda: setattr(mod.Consts, "SCALE", 3)), ("SIZES", lambda: mod.SIZES.__setitem__(0, 5))]
    for name, change in changes:
        before = collect_dependencies(mod.k.fn)
        change()
        after = collect_dependencies(mod.k.fn)
        assert after.texts != before.texts, name
        if name != "LUT":             # an array changed in place is seen by the next compile only
            assert not before.is_current(), name
        assert after.is_current()


def test_library_objects_are_keyed_by_a_full_repr_or_refused(tmp_path):
    """A library object is keyed by its repr only when the repr names it: an abbreviated repr (a long
    tensor's) could be equal for different data, so the compile refuses it."""
    from tylo.frontend.source import collect_dependencies

    mod = _module(tmp_path, "library_values_mod", '''
        import fractions
        import tylo

        class Abbreviated(fractions.Fraction):
            __module__ = "fractions"
            def __repr__(self):
                return "Abbreviated(1, ..., 9)"

        RATIO = fractions.Fraction(1, 3)
        LONG = Abbreviated(2, 3)

        @tylo.jit
        def ok(out):
            out[0] = float(RATIO)

        @tylo.jit
        def refused(out):
            out[0] = float(LONG)
    ''')
    assert any("Fraction(1, 3)" in t for t in collect_dependencies(mod.ok.fn).texts)
    with pytest.raises(CompileError, match="'LONG' cannot be part of the kernel's cache key"):
        collect_dependencies(mod.refused.fn)


def test_library_callables_and_dtypes_fingerprint_by_name():
    import numpy as np

    from tylo.frontend.source import _Walker

    w = _Walker("__tylo_func__")
    texts = {name: w.fingerprint(v, 0, set()) for name, v in
             (("f16", tylo.f16), ("bf16", tylo.bf16), ("prod", np.prod), ("rng", np.random.default_rng),
              ("sqrt", np.sqrt))}
    assert texts["f16"] != texts["bf16"] and "bf16" in texts["bf16"]
    assert texts["prod"] == f"callable numpy.prod@{np.__version__}"
    assert "default_rng" in texts["rng"] and "sqrt" in texts["sqrt"]
