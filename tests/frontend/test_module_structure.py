"""The frontend and layouts packages keep the shape issue 10 asked for: no import cycles (also none closed
by an import inside a function), no import of another module's private name, and the frontend visitor in
one module per idea."""
import ast
import pathlib

import tylo

ROOT = pathlib.Path(tylo.__file__).parent
AREA = sorted([*ROOT.joinpath("layouts").glob("*.py"), *ROOT.joinpath("frontend").glob("*.py"),
               *(ROOT / "lang" / f"{m}.py" for m in ("base", "core", "tiles", "fragment", "indexing", "softmax",
                                                    "protocols"))])


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: pathlib.Path):
    """(imported module, imported names, inside a function?) for each tylo-internal import of ``path``."""
    tree = ast.parse(path.read_text())
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rsplit(".", 1)[0]
    in_function = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                   for n in ast.walk(f) if n is not f}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("tylo"):
                yield target, [a.name for a in node.names], id(node) in in_function


def test_no_private_names_imported_across_modules():
    offenders = []
    for path in AREA:
        for target, names, _ in imports(path):
            offenders += [f"{module_name(path)} imports {n} from {target}" for n in names
                          if n.startswith("_") and not n.startswith("__")]
    assert not offenders, offenders


def test_layouts_import_nothing_of_tylo_inside_functions_and_have_no_cycles():
    graph = {}
    for path in ROOT.joinpath("layouts").glob("*.py"):
        edges = set()
        for target, names, inside in imports(path):
            assert not inside, f"{module_name(path)} imports {target} inside a function (an import cycle closer)"
            # ``from . import x`` names a module of the package
            for n in names:
                edges.add(f"{target}.{n}" if f"{target}.{n}" in {module_name(p) for p in AREA} else target)
        graph[module_name(path)] = edges - {module_name(path)}
    seen, stack = set(), []

    def visit(m):
        assert m not in stack, f"import cycle: {' -> '.join(stack[stack.index(m):] + [m])}"
        if m in seen:
            return
        stack.append(m)
        for n in graph.get(m, ()):
            visit(n)
        stack.pop()
        seen.add(m)

    for m in graph:
        visit(m)


def test_frontend_visitor_is_split_by_idea():
    from tylo.frontend.calls import CallsMixin
    from tylo.frontend.control_flow import ControlFlowMixin
    from tylo.frontend.expressions import ExpressionsMixin
    from tylo.frontend.generator import Generator
    from tylo.frontend.visitor import VisitorCore

    assert issubclass(Generator, (ExpressionsMixin, ControlFlowMixin, CallsMixin, VisitorCore))
    assert "visit_If" in vars(ControlFlowMixin) and "visit_While" in vars(ControlFlowMixin)
    assert "visit_BinOp" in vars(ExpressionsMixin) and "visit_Call" in vars(CallsMixin)
    for path in ROOT.joinpath("frontend").glob("*.py"):
        assert len(path.read_text().splitlines()) < 600, f"{path.name} is growing back into one big module"
