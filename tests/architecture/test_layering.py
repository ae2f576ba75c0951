"""Import structure of the IR, its two backends and the hardware-feature modules of lang: layers
import only downward (DESIGN.md), no import cycles (counting imports inside functions), and no
module imports another module's private ``_name``."""
import ast
import pathlib

import pytest

import tylo

ROOT = pathlib.Path(tylo.__file__).parent
FEATURE_LANG = ("copy", "mma", "tma", "mbarrier", "wgmma", "tcgen05", "tmem")


def _module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(*packages):
    for pkg in packages:
        base = ROOT / pkg.replace(".", "/")
        files = sorted(base.rglob("*.py")) if base.is_dir() else [base.with_suffix(".py")]
        for f in files:
            yield _module_name(f), f


def _imports(name: str, path: pathlib.Path):
    """(imported module, imported names) for every import in the file, at any depth."""
    is_pkg = path.name == "__init__.py"
    package = name if is_pkg else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, ()
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            names = tuple(a.name for a in node.names)
            # ``from pkg import submodule`` imports the submodule
            subs = [n for n in names if (ROOT.parent / (target + "." + n).replace(".", "/")).with_suffix(".py").exists()
                    or (ROOT.parent / (target + "." + n).replace(".", "/") / "__init__.py").exists()]
            for n in subs:
                yield f"{target}.{n}", ()
            rest = tuple(n for n in names if n not in subs)
            if rest:
                yield target, rest


AREA = ("ir", "codegen", "interpreter") + tuple(f"lang.{m}" for m in FEATURE_LANG)
ALLOWED = {  # DESIGN.md's layer table, for the packages of this area
    "tylo.ir": ("tylo.ir", "tylo.layouts"),
    "tylo.codegen": ("tylo.codegen", "tylo.ir"),
    "tylo.interpreter": ("tylo.interpreter", "tylo.ir", "tylo.layouts"),
}


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layers_import_only_downward(layer):
    bad = []
    for name, path in _modules(layer[len("tylo."):]):
        for target, _ in _imports(name, path):
            if target.startswith("tylo") and not any(target == a or target.startswith(a + ".") for a in ALLOWED[layer]):
                bad.append(f"{name} imports {target}")
    assert not bad, "\n".join(bad)


def test_lang_does_not_import_runtime():
    bad = [f"{name} imports {t}" for name, path in _modules("lang") for t, _ in _imports(name, path)
           if t == "tylo.runtime" or t.startswith("tylo.runtime.")]
    assert not bad, "\n".join(bad)


def test_no_import_cycles():
    graph = {}
    for name, path in _modules("ir", "codegen", "interpreter"):
        graph[name] = {t for t, _ in _imports(name, path) if t.startswith("tylo.") and t != name}
    state, stack, cycles = {}, [], []

    def visit(n):
        state[n] = "open"
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if m not in graph:
                continue
            if state.get(m) == "open":
                cycles.append(" -> ".join(stack[stack.index(m):] + [m]))
            elif m not in state:
                visit(m)
        stack.pop()
        state[n] = "done"

    for n in sorted(graph):
        if n not in state:
            visit(n)
    assert not cycles, "\n".join(cycles)


# Private helpers of modules another engineer owns in this wave (tylo/lang/tiles.py, tylo/layouts);
# they become public there, then these entries go.
ELSEWHERE: set = set()  # (module, private name) pairs still imported across modules: none


def test_no_private_names_imported_across_modules():
    bad = []
    for name, path in _modules(*AREA):
        for target, names in _imports(name, path):
            if not target.startswith("tylo"):
                continue
            for n in names:
                if n.startswith("_") and not n.startswith("__") and (target, n) not in ELSEWHERE:
                    bad.append(f"{name} imports {n} from {target}")
    assert not bad, "\n".join(bad)


def test_ops_are_defined_only_in_tylo_ir():
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        if path.is_relative_to(ROOT / "ir"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                fn = node.func
                name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
                if name in ("register_op", "define_ops", "OpDef"):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno} calls {name}")
    assert not bad, "op definitions outside tylo/ir:\n" + "\n".join(bad)


def test_ir_is_complete_without_lang():
    """In a fresh process that loads tylo.ir without tylo's package init (so nothing imports lang),
    OPS already holds every op the full package knows."""
    import subprocess
    import sys

    from tylo.ir import OPS

    code = (
        "import sys, types\n"
        f"pkg = types.ModuleType('tylo'); pkg.__path__ = [{str(ROOT)!r}]; sys.modules['tylo'] = pkg\n"
        "import tylo.ir\n"
        "assert not [m for m in sys.modules if m.startswith(('tylo.lang', 'tylo.frontend', 'tylo.codegen'))]\n"
        "print(' '.join(sorted(tylo.ir.OPS)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == sorted(OPS)
