"""The cache fault injector: damage cache entries, race writers, kill them, change what a key should
cover, and check that tylo never serves a wrong cubin and never hangs.

``check_fault(seed, folder)`` runs fault ``FAULTS[seed % len(FAULTS)]`` with a seeded variant (which
file, which bit) and returns a dict whose ``status`` is:

* ``ok``: what was served equals a fresh compile (cubin, PTX, dynamic shared memory), or the
  compile refused with a clear CompileError;
* ``wrong_cubin``: a served entry differs from a fresh compile (or its launch metadata does);
* ``stale_key``: after an edit that changes the kernel, a fresh process got the old kernel;
* ``exception``: an exception other than a warning came out of ``compile()``;
* ``hang``: the lookup did not finish within the timeout (run in a subprocess);
* ``leftover``: a killed writer's temporary folder survived the next write.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ARTIFACTS = ("meta.json", "kernel.tyir", "kernel.ll", "kernel.ptx", "kernel.cubin")
SUBPROCESS_TIMEOUT = 60.0
FIFO_TIMEOUT = 5.0   # the least time a FIFO lookup gets (a healthy one takes about 1 s)

KERNEL_SOURCE = '''\
import tylo


@tylo.func
def scale(x):
    return x * 2.0


@tylo.jit
def cached_kernel(out, x, n, K: tylo.constexpr):
    s = tylo.shared_array(tylo.f32, (64,))
    i = tylo.thread_idx.x
    s[i] = x[i]
    tylo.sync_threads()
    if i < n:
        out[i] = scale(s[i]) + K
'''
SIGNATURE = "*f32, *f32, i32"


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


# -- helpers that run in this process -------------------------------------------------------------
_REF: dict = {}


def _module(folder):
    import importlib.util

    path = os.path.join(folder, "cache_fault_kernel.py")
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write(KERNEL_SOURCE)
    name = "cache_fault_kernel_" + hashlib.md5(folder.encode()).hexdigest()[:8]
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


def _compile(folder, cache_dir, k=1):
    os.environ["TYLO_CACHE_DIR"] = cache_dir
    kernel = _module(folder).cached_kernel
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return kernel.compile(signature=SIGNATURE, arch="sm_90a", constexprs={"K": k})


def reference(folder, k=1):
    """A fresh compile (empty cache) of the fault kernel: what every served entry must equal."""
    if (folder, k) not in _REF:
        c = _compile(folder, os.path.join(folder, f"ref-cache-{k}-{os.getpid()}-{time.time_ns()}"), k)
        _REF[(folder, k)] = c
    return _REF[(folder, k)]


def same_kernel(a, b) -> str | None:
    """Why compiled kernel ``a`` differs from ``b`` in anything a launch uses (None when equal)."""
    if a.cubin != b.cubin:
        return f"cubin differs (sha {sha(a.cubin)[:12]} vs {sha(b.cubin)[:12]})"
    if a.shared_bytes != b.shared_bytes:
        return f"dynamic shared memory {a.shared_bytes} vs {b.shared_bytes}"
    if a.name != b.name or [str(t) for t in a.param_types] != [str(t) for t in b.param_types]:
        return "kernel name or parameter types differ"
    if a.ptx != b.ptx:
        return "ptx differs"
    return None


def _entry_dir(cache_dir):
    keys = [n for n in os.listdir(cache_dir) if len(n) == 64]
    assert len(keys) == 1, keys
    return os.path.join(cache_dir, keys[0])


def _serve_and_compare(folder, cache_dir, result, k=1):
    ref = reference(folder, k)
    try:
        served = _compile(folder, cache_dir, k)
    except Exception as exc:  # noqa: BLE001 - any exception is a failure of the cache
        result.update(status="exception", detail=f"{type(exc).__name__}: {exc}"[:500])
        return result
    why = same_kernel(served, ref)
    if why:
        result.update(status="wrong_cubin", detail=f"{why}; from_cache={served.from_cache}")
    return result


# -- artifact faults ------------------------------------------------------------------------------------
def _flip(path, r):
    data = bytearray(open(path, "rb").read())
    if not data:
        return "empty"
    i = r.randrange(len(data))
    bit = r.randrange(8)
    data[i] ^= 1 << bit
    open(path, "wb").write(bytes(data))
    return f"byte {i} bit {bit}"


def artifact_fault(kind):
    def fault(seed, folder, cache_dir, result, r):
        _compile(folder, cache_dir)
        entry = _entry_dir(cache_dir)
        fname = r.choice(ARTIFACTS)
        path = os.path.join(entry, fname)
        result["target"] = fname
        if kind == "delete":
            os.remove(path)
        elif kind == "truncate0":
            open(path, "wb").close()
        elif kind == "truncate_half":
            data = open(path, "rb").read()
            open(path, "wb").write(data[: len(data) // 2])
        elif kind == "flip_bit":
            result["where"] = _flip(path, r)
        elif kind == "append":
            with open(path, "ab") as f:
                f.write(b"\x00garbage")
        elif kind == "dir":
            os.remove(path)
            os.mkdir(path)
        elif kind == "other_entry":  # the same file of another kernel's entry
            other_cache = os.path.join(folder, f"other-{seed}")
            _compile(folder, other_cache, k=2)
            shutil.copy(os.path.join(_entry_dir(other_cache), fname), path)
        elif kind == "symlink_other":
            other_cache = os.path.join(folder, f"other-{seed}")
            _compile(folder, other_cache, k=2)
            os.remove(path)
            os.symlink(os.path.join(_entry_dir(other_cache), fname), path)
        return _serve_and_compare(folder, cache_dir, result)
    return fault


# -- meta.json faults ----------------------------------------------------------------------------------
def meta_fault(kind):
    def fault(seed, folder, cache_dir, result, r):
        _compile(folder, cache_dir)
        entry = _entry_dir(cache_dir)
        mpath = os.path.join(entry, "meta.json")
        meta = json.load(open(mpath))
        if kind == "shared_bytes":
            meta["dynamic_shared_bytes"] = r.choice([0, 4, 1 << 20, meta.get("dynamic_shared_bytes", 0) * 2 + 1])
        elif kind == "drop_cubin_digest":   # and damage the cubin: nothing verifies it any more
            meta["files"].pop("kernel.cubin", None)
            _flip(os.path.join(entry, "kernel.cubin"), r)
        elif kind == "drop_tyir":
            meta["files"].pop("kernel.tyir", None)
            os.remove(os.path.join(entry, "kernel.tyir"))
        elif kind == "not_object":
            meta = [meta]
        elif kind == "other_key":
            meta["key"] = "0" * 64
        elif kind == "files_not_dict":
            meta["files"] = list(meta["files"])
        elif kind == "bad_digest":
            meta["files"]["kernel.cubin"] = "z" * 64
        elif kind == "empty_files":
            meta["files"] = {}
        elif kind == "kernel_name":
            meta["kernel"] = "other_kernel"
        elif kind == "bit_flip_valid_json":   # single-bit flips until one still parses (item 17's 20 of 2,250)
            raw = open(mpath, "rb").read()
            for _ in range(200):
                data = bytearray(raw)
                i, bit = r.randrange(len(data)), r.randrange(8)
                data[i] ^= 1 << bit
                try:
                    json.loads(bytes(data))
                except ValueError:
                    continue
                open(mpath, "wb").write(bytes(data))
                result["where"] = f"byte {i} bit {bit}"
                return _serve_and_compare(folder, cache_dir, result)
            return result
        open(mpath, "w").write(json.dumps(meta))
        return _serve_and_compare(folder, cache_dir, result)
    return fault


def entry_fault(kind):
    def fault(seed, folder, cache_dir, result, r):
        _compile(folder, cache_dir)
        entry = _entry_dir(cache_dir)
        if kind == "entry_is_file":
            shutil.rmtree(entry)
            open(entry, "w").write("not a folder")
        elif kind == "entry_empty":
            shutil.rmtree(entry)
            os.mkdir(entry)
        elif kind == "entry_of_other_kernel":
            other_cache = os.path.join(folder, f"other-{seed}")
            _compile(folder, other_cache, k=2)
            shutil.rmtree(entry)
            shutil.copytree(_entry_dir(other_cache), entry)
        elif kind == "root_is_file":
            shutil.rmtree(cache_dir)
            open(cache_dir, "w").write("not a folder")
        elif kind == "root_readonly":
            os.chmod(cache_dir, 0o555)
            os.chmod(entry, 0o555)
        elif kind == "root_unwritable":   # works as root too: nothing can be created under /proc
            return _serve_and_compare(folder, f"/proc/tylo-fuzz-cache-{seed}", result)
        try:
            return _serve_and_compare(folder, cache_dir, result)
        finally:
            if os.path.isdir(cache_dir):
                os.chmod(cache_dir, 0o755)
                if os.path.isdir(entry):
                    os.chmod(entry, 0o755)
    return fault


# -- faults that need other processes -------------------------------------------------------------------
def _child(code, env_extra, timeout=SUBPROCESS_TIMEOUT, cwd=None):
    # callers pass a cwd of their own: `python -c` imports from its working directory first, so a child
    # started in a repository root would run that tylo whatever PYTHONPATH says
    env = dict(os.environ)
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=cwd)


CHILD_COMPILE = textwrap.dedent('''
    import hashlib, importlib, json, sys, warnings
    warnings.simplefilter("ignore")
    sys.path.insert(0, {folder!r})
    mod = importlib.import_module({module!r})
    try:
        c = mod.{kernel}.compile(signature={signature!r}, arch="sm_90a", constexprs={constexprs!r})
        import tylo
        print(json.dumps({{"sha": hashlib.sha256(c.cubin).hexdigest(), "shared": c.shared_bytes,
                          "from_cache": c.from_cache, "tylo_file": tylo.__file__}}))
    except Exception as exc:
        import tylo
        kind = "compile_error" if isinstance(exc, tylo.CompileError) and "internal" not in str(exc) else "error"
        print(json.dumps({{"error": kind, "detail": type(exc).__name__ + ": " + str(exc)}}))
''')


def _child_compile(folder, cache_dir, module="cache_fault_kernel", kernel="cached_kernel", signature=SIGNATURE,
                   constexprs=None, pythonpath=ROOT, timeout=SUBPROCESS_TIMEOUT):
    code = CHILD_COMPILE.format(folder=folder, module=module, kernel=kernel, signature=signature,
                                constexprs=constexprs if constexprs is not None else {"K": 1})
    # cwd=folder: `python -c` puts the working directory first on sys.path, so run from the repository root
    # the child would import that tylo instead of the one on PYTHONPATH (a copy in tylo_source_fault)
    proc = _child(code, {"TYLO_CACHE_DIR": cache_dir, "PYTHONPATH": pythonpath}, timeout=timeout, cwd=folder)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return {"error": "crash", "detail": f"exit {proc.returncode}: {proc.stderr[-400:]}"}
    return json.loads(lines[-1])


def fifo_fault(seed, folder, cache_dir, result, r):
    _compile(folder, cache_dir)
    entry = _entry_dir(cache_dir)
    # how long a healthy lookup takes in a fresh process on this machine now: the FIFO case gets
    # several times that (at least FIFO_TIMEOUT), so a loaded machine is not mistaken for a hang
    t0 = time.monotonic()
    _child_compile(folder, cache_dir)
    timeout = max(FIFO_TIMEOUT, 4 * (time.monotonic() - t0))
    fname = r.choice(ARTIFACTS)
    result["target"] = fname
    os.remove(os.path.join(entry, fname))
    os.mkfifo(os.path.join(entry, fname))
    try:
        out = _child_compile(folder, cache_dir, timeout=timeout)
    except subprocess.TimeoutExpired:
        result.update(status="hang", detail=f"lookup with {fname} a FIFO did not finish in {timeout:.0f} s")
        return result
    return _judge_child(folder, out, result)


def _judge_child(folder, out, result, k=1):
    ref = reference(folder, k)
    if "error" in out:
        result.update(status="exception", detail=out["detail"][:500])
    elif out["sha"] != sha(ref.cubin) or out["shared"] != ref.shared_bytes:
        result.update(status="wrong_cubin", detail=f"served {out}")
    return result


def _tmp_leftovers(cache_dir):
    if not os.path.isdir(cache_dir):
        return []
    return [n for n in os.listdir(cache_dir) if n.startswith(".tmp-")]


def kill_fault(seed, folder, cache_dir, result, r):
    """kill -9 a writer at a random moment, then compile in this process and store another entry."""
    _module(folder)   # writes the kernel's file, which the writer imports
    os.makedirs(cache_dir, exist_ok=True)
    code = CHILD_COMPILE.format(folder=folder, module="cache_fault_kernel", kernel="cached_kernel",
                                signature=SIGNATURE, constexprs={"K": 1})
    env = dict(os.environ, TYLO_CACHE_DIR=cache_dir, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env, cwd=folder)
    delay = r.uniform(0.3, 2.5)
    result["delay"] = round(delay, 2)
    time.sleep(delay)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    _serve_and_compare(folder, cache_dir, result)
    if result["status"] != "ok":
        return result
    # a killed writer's temporary folder (a dead pid, an hour old) must not survive the next write
    stale = os.path.join(cache_dir, f".tmp-{'ab' * 8}-{proc.pid}-deadbeef0000")
    os.makedirs(stale, exist_ok=True)
    open(os.path.join(stale, "kernel.cubin"), "wb").write(b"partial")
    old = time.time() - 7200
    os.utime(stale, (old, old))
    _compile(folder, cache_dir, k=3)   # a new write
    # only the planted hour-old folder must go: the killed writer's own fresh .tmp- folder (when the kill
    # came mid-write) looks like a live writer's and is kept until it is stale (docs/cache.md)
    left = [n for n in _tmp_leftovers(cache_dir) if n == os.path.basename(stale)]
    if left:
        result.update(status="leftover", detail=f"temporary folders of killed writers survive a write: {left}")
    return result


def concurrent_fault(seed, folder, cache_dir, result, r):
    n = r.choice([3, 4, 6])
    _module(folder)
    os.makedirs(cache_dir, exist_ok=True)
    code = CHILD_COMPILE.format(folder=folder, module="cache_fault_kernel", kernel="cached_kernel",
                                signature=SIGNATURE, constexprs={"K": 1})
    env = dict(os.environ, TYLO_CACHE_DIR=cache_dir, PYTHONPATH=ROOT)
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              env=env, text=True, cwd=folder) for _ in range(n)]
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=SUBPROCESS_TIMEOUT * 2)
        except subprocess.TimeoutExpired:
            p.kill()
            result.update(status="hang", detail="a concurrent writer did not finish")
            return result
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        outs.append(json.loads(lines[-1]) if lines else {"error": "crash", "detail": f"exit {p.returncode}"})
    result["writers"] = n
    for out in outs:
        _judge_child(folder, out, result)
        if result["status"] != "ok":
            return result
    return _serve_and_compare(folder, cache_dir, result)


# -- key mutations in fresh processes ------------------------------------------------------------------------
KEY_CASES = {
    # name: (files of version 1, files of version 2); the kernel module is keymod.py, kernel "kk"
    "global_int": ({"keymod.py": "import tylo\nSCALE = 2\n\n@tylo.jit\ndef kk(out):\n    out[0] = SCALE\n"},
                   {"keymod.py": "import tylo\nSCALE = 3\n\n@tylo.jit\ndef kk(out):\n    out[0] = SCALE\n"}),
    "global_dict": ({"keymod.py": "import tylo\nCFG = {'scale': 2}\n\n@tylo.jit\ndef kk(out):\n    out[0] = CFG['scale']\n"},
                    {"keymod.py": "import tylo\nCFG = {'scale': 3}\n\n@tylo.jit\ndef kk(out):\n    out[0] = CFG['scale']\n"}),
    "numpy_int_branch": (
        {"keymod.py": "import numpy as np\nimport tylo\nMODE = np.int64(1)\n\n@tylo.jit\ndef kk(out):\n"
                      "    if MODE > 1:\n        out[0] = 5\n    else:\n        out[0] = 7\n"},
        {"keymod.py": "import numpy as np\nimport tylo\nMODE = np.int64(2)\n\n@tylo.jit\ndef kk(out):\n"
                      "    if MODE > 1:\n        out[0] = 5\n    else:\n        out[0] = 7\n"}),
    "module_named_math": (
        {"mathparams.py": "SCALE = 2\n",
         "keymod.py": "import tylo\nimport mathparams\n\n@tylo.jit\ndef kk(out):\n    out[0] = mathparams.SCALE\n"},
        {"mathparams.py": "SCALE = 3\n"}),
    "module_named_tylo": (
        {"tyloparams.py": "SCALE = 2\n",
         "keymod.py": "import tylo\nimport tyloparams\n\n@tylo.jit\ndef kk(out):\n    out[0] = tyloparams.SCALE\n"},
        {"tyloparams.py": "SCALE = 3\n"}),
    "helper_in_dict": (
        {"keymod.py": "import tylo\n\n@tylo.func\ndef h(x):\n    return x + 1\n\nHELPERS = {'h': h}\n\n"
                      "@tylo.jit\ndef kk(out):\n    out[0] = HELPERS['h'](out[1])\n"},
        {"keymod.py": "import tylo\n\n@tylo.func\ndef h(x):\n    return x + 2\n\nHELPERS = {'h': h}\n\n"
                      "@tylo.jit\ndef kk(out):\n    out[0] = HELPERS['h'](out[1])\n"}),
    "config_method": (
        {"keymod.py": "import tylo\n\nclass Cfg:\n    def scale(self):\n        return 2\n\nCFG = Cfg()\n\n"
                      "@tylo.jit\ndef kk(out):\n    out[0] = CFG.scale()\n"},
        {"keymod.py": "import tylo\n\nclass Cfg:\n    def scale(self):\n        return 3\n\nCFG = Cfg()\n\n"
                      "@tylo.jit\ndef kk(out):\n    out[0] = CFG.scale()\n"}),
    "global_before_local": (
        {"keymod.py": "import tylo\nK = 2\n\n@tylo.jit\ndef kk(out):\n    out[0] = K\n    K = 5\n    out[1] = K\n"},
        {"keymod.py": "import tylo\nK = 3\n\n@tylo.jit\ndef kk(out):\n    out[0] = K\n    K = 5\n    out[1] = K\n"}),
    "helper_module_edit": (
        {"helpmod.py": "import tylo\n\n@tylo.func\ndef h(x):\n    return x + 1\n",
         "keymod.py": "import tylo\nimport helpmod\n\n@tylo.jit\ndef kk(out):\n    out[0] = helpmod.h(out[1])\n"},
        {"helpmod.py": "import tylo\n\n@tylo.func\ndef h(x):\n    return x + 2\n"}),
}


def _write(folder, files):
    for name, text in files.items():
        with open(os.path.join(folder, name), "w") as f:
            f.write(text)


def key_fault(case):
    def fault(seed, folder, cache_dir, result, r):
        work = os.path.join(folder, f"key-{seed}")
        fresh_work = os.path.join(folder, f"key-{seed}-fresh")
        os.makedirs(work, exist_ok=True)
        os.makedirs(fresh_work, exist_ok=True)
        v1, v2 = KEY_CASES[case]
        _write(work, v1)
        _write(fresh_work, {**v1, **v2})
        # version 1 into the shared cache and version 2 into an empty one, at the same time
        with ThreadPoolExecutor(2) as pool:
            first_f = pool.submit(_child_compile, work, cache_dir, module="keymod", kernel="kk",
                                  signature="*i32", constexprs={})
            fresh_f = pool.submit(_child_compile, fresh_work, os.path.join(fresh_work, "cache"), module="keymod",
                                  kernel="kk", signature="*i32", constexprs={})
            first, fresh = first_f.result(), fresh_f.result()
        _write(work, v2)
        served = _child_compile(work, cache_dir, module="keymod", kernel="kk", signature="*i32", constexprs={})
        return _judge_key(first, served, fresh, result)
    return fault


def _judge_key(first, served, fresh, result):
    for out in (first, served, fresh):
        if out.get("error") == "compile_error":
            result["detail"] = "refused with a CompileError: " + out["detail"][:300]
            return result       # refusing what the key cannot cover is allowed
        if "error" in out:
            result.update(status="exception", detail=out["detail"][:500])
            return result
    if served["sha"] != fresh["sha"]:
        result.update(status="stale_key", detail=f"edited kernel served the old cubin (from_cache="
                                                 f"{served['from_cache']})")
    return result


IN_PROCESS_EDIT = textwrap.dedent('''
    import hashlib, importlib, json, sys, time, warnings
    warnings.simplefilter("ignore")
    sys.path.insert(0, {work!r})
    import helpmod, keymod
    a = keymod.kk.compile(signature="*i32", arch="sm_90a")
    open({path!r}, "w").write({v2!r})
    time.sleep(0.01)
    importlib.reload(helpmod)
    b = keymod.kk.compile(signature="*i32", arch="sm_90a")
    print(json.dumps({{"sha": hashlib.sha256(b.cubin).hexdigest(), "shared": b.shared_bytes,
                      "from_cache": b.from_cache}}))
''')


def in_process_edit_fault(seed, folder, cache_dir, result, r):
    """A helper edited and reloaded in one process (a notebook): the next compile must see the edit."""
    work = os.path.join(folder, f"nb-{seed}")
    os.makedirs(work, exist_ok=True)
    v1, v2 = KEY_CASES["helper_module_edit"]
    _write(work, v1)
    code = IN_PROCESS_EDIT.format(work=work, path=os.path.join(work, "helpmod.py"), v2=v2["helpmod.py"])
    proc = _child(code, {"TYLO_CACHE_DIR": cache_dir, "PYTHONPATH": ROOT}, cwd=work)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    edited = json.loads(lines[-1]) if lines else {"error": "crash", "detail": proc.stderr[-400:]}
    later = _child_compile(work, cache_dir, module="keymod", kernel="kk", signature="*i32", constexprs={})
    fresh = _child_compile(work, os.path.join(work, "fresh-cache"), module="keymod", kernel="kk",
                           signature="*i32", constexprs={})
    _judge_key({"sha": ""}, edited, fresh, result)
    if result["status"] == "ok":
        _judge_key({"sha": ""}, later, fresh, result)
    return result


def tylo_source_fault(seed, folder, cache_dir, result, r):
    """A copy of tylo whose sources differ (a fix) must not load the entries of the original."""
    copy, same = os.path.join(folder, f"tylo-copy-{seed}"), os.path.join(folder, f"tylo-same-{seed}")
    if not os.path.isdir(same):
        shutil.copytree(os.path.join(ROOT, "tylo"), os.path.join(same, "tylo"),
                        ignore=shutil.ignore_patterns("__pycache__"))
    if not os.path.isdir(copy):
        shutil.copytree(os.path.join(ROOT, "tylo"), os.path.join(copy, "tylo"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        # a change to a code generator's source (the first of these that exists in this layout)
        edited = next(p for p in (os.path.join(copy, "tylo", "codegen", "llvm.py"),
                                  os.path.join(copy, "tylo", "codegen", "__init__.py"),
                                  os.path.join(copy, "tylo", "__init__.py")) if os.path.exists(p))
        with open(edited, "a") as f:
            f.write("\n_FUZZ_EDIT = 1  # a change to the compiler's sources\n")
    _compile(folder, cache_dir)
    # control: an unedited copy (same sources, elsewhere on disk) must load the entry, or the edited
    # copy's miss below would prove nothing
    control = _child_compile(folder, cache_dir, pythonpath=same)
    if "error" in control or not control["from_cache"]:
        result.update(status="exception", detail=f"an unedited copy of tylo did not load the entry: {control}")
        return result
    out = _child_compile(folder, cache_dir, pythonpath=copy)
    if "error" in out:
        result.update(status="exception", detail=out["detail"][:500])
    elif not os.path.realpath(out["tylo_file"]).startswith(os.path.realpath(copy) + os.sep):
        # the fault only means something if the child really ran the copy
        result.update(status="exception", detail=f"the child imported {out['tylo_file']}, not the copy in {copy}")
    elif out["from_cache"]:
        result.update(status="stale_key", detail="a tylo with other sources loaded the entry of the original")
    return result


def nogpu_fault(seed, folder, cache_dir, result, r):
    """Without a GPU, a launch raises the same error each time, its traceback not growing."""
    from tylo.runtime import driver

    if driver.gpu_available():
        result["detail"] = "a GPU is present: not applicable"
        return result
    kernel = _module(folder).cached_kernel
    sizes = []
    for _ in range(3):
        try:
            kernel[1, 1](0, 0, 3, K=1)
        except Exception as exc:  # noqa: BLE001
            n = 0
            tb = exc.__traceback__
            while tb is not None:
                n += 1
                tb = tb.tb_next
            sizes.append((type(exc).__name__, n))
    result["tracebacks"] = sizes
    if len({s[1] for s in sizes}) > 1:
        result.update(status="exception", detail=f"the no-GPU error's traceback grows: {sizes}")
    return result


FAULTS = (
    [(f"artifact_{k}", artifact_fault(k)) for k in
     ("delete", "truncate0", "truncate_half", "flip_bit", "append", "dir", "other_entry", "symlink_other")]
    + [(f"meta_{k}", meta_fault(k)) for k in
       ("shared_bytes", "drop_cubin_digest", "drop_tyir", "not_object", "other_key", "files_not_dict",
        "bad_digest", "empty_files", "kernel_name", "bit_flip_valid_json")]
    + [(k, entry_fault(k)) for k in
       ("entry_is_file", "entry_empty", "entry_of_other_kernel", "root_is_file", "root_readonly",
        "root_unwritable")]
    + [("fifo", fifo_fault), ("kill9", kill_fault), ("concurrent", concurrent_fault),
       ("tylo_sources", tylo_source_fault), ("in_process_edit", in_process_edit_fault), ("nogpu", nogpu_fault)]
    + [(f"key_{k}", key_fault(k)) for k in KEY_CASES]
)
FAULT_NAMES = [n for n, _ in FAULTS]


def describe_fault(seed):
    return f"seed {seed}: fault {FAULTS[seed % len(FAULTS)][0]}"


def check_fault(seed, folder, name=None):
    name = name or FAULTS[seed % len(FAULTS)][0]
    fn = dict(FAULTS)[name]
    r = random.Random(seed)
    cache_dir = os.path.join(folder, f"cache-{seed}-{name}")
    if os.path.exists(cache_dir):
        shutil.rmtree(cache_dir, ignore_errors=True)
    result = {"seed": seed, "fault": name, "category": name, "status": "ok", "detail": ""}
    saved = os.environ.get("TYLO_CACHE_DIR")
    saved_lineinfo = os.environ.get("TYLO_LINEINFO")
    # no line info in any process of a fault: the cubin would carry the kernel file's path, and faults
    # compare the cubins of one kernel compiled in different folders and processes
    os.environ["TYLO_LINEINFO"] = "0"
    try:
        fn(seed, folder, cache_dir, result, r)
    except subprocess.TimeoutExpired as exc:
        result.update(status="hang", detail=f"a subprocess did not finish: {exc}")
    except Exception as exc:  # noqa: BLE001
        result.update(status="exception", detail=f"{type(exc).__name__}: {exc}"[:500])
    finally:
        if saved is None:
            os.environ.pop("TYLO_CACHE_DIR", None)
        else:
            os.environ["TYLO_CACHE_DIR"] = saved
        if saved_lineinfo is None:
            os.environ.pop("TYLO_LINEINFO", None)
        else:
            os.environ["TYLO_LINEINFO"] = saved_lineinfo
    return result
