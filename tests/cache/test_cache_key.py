"""cache_key: stable across processes and dict order, sensitive to every component."""

import copy
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tylo.cache import cache_key, canonical_json

REPO = Path(__file__).resolve().parents[2]

SAXPY = '''@tylo.jit
def saxpy(out, x, y, a: tylo.f32, n: tylo.i32, BLOCK: tylo.constexpr):
    i = tylo.block_idx.x * BLOCK + tylo.thread_idx.x
    if i < n:
        out[i] = a * x[i] + y[i]
'''


def components():
    return {
        "tylo": "0.1.0",
        "llvm": "22.1.0",
        "nvjitlink": "13.5",
        "sources": [SAXPY, "def helper(x):\n    return x * 2\n", "TILE = 128"],
        "specialization": ["*f32:16", "*f32:16", "*f32:16", "f32", "i32"],
        "constexprs": {"BLOCK": 256, "SCALE": 0.5, "FAST": True, "MODE": "rn", "NONE": None},
        "target": "sm_90a",
        "options": {"num_warps": 4, "opt_level": 3},
    }


def test_key_is_64_hex_and_deterministic():
    k = cache_key(components())
    assert re.fullmatch(r"[0-9a-f]{64}", k)
    assert cache_key(components()) == k


def test_key_ignores_dict_order():
    c = components()
    reordered = {k: c[k] for k in reversed(list(c))}
    reordered["constexprs"] = {k: c["constexprs"][k] for k in reversed(list(c["constexprs"]))}
    assert cache_key(reordered) == cache_key(c)


def test_canonical_json_has_sorted_keys_and_no_spaces():
    assert canonical_json({"b": [1, 2], "a": {"y": 1, "x": "é"}}) == '{"a":{"x":"é","y":1},"b":[1,2]}'


def test_key_is_stable_across_processes():
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from tylo.cache import cache_key;"
        "print(cache_key({'sources': ['x = 1'], 'constexprs': {'B': 64, 'F': 0.1}, 'target': 'sm_80'}))"
    )
    outs = {
        subprocess.run([sys.executable, "-c", code, str(REPO)], capture_output=True, text=True,
                       check=True, env={"PYTHONHASHSEED": str(seed), "PATH": "/usr/bin:/bin"}).stdout.strip()
        for seed in (1, 2)
    }
    assert outs == {cache_key({"sources": ["x = 1"], "constexprs": {"B": 64, "F": 0.1}, "target": "sm_80"})}


def _mutations():
    """(name, function changing one thing in the components)."""
    def set_(path, value):
        def f(c):
            d = c
            for p in path[:-1]:
                d = d[p]
            d[path[-1]] = value
        return f

    return [
        ("tylo version", set_(["tylo"], "0.1.1")),
        ("llvm version", set_(["llvm"], "22.1.1")),
        ("nvjitlink version", set_(["nvjitlink"], "13.6")),
        ("kernel source", set_(["sources", 0], SAXPY.replace("a * x[i]", "x[i] * a"))),
        ("kernel source whitespace", set_(["sources", 0], SAXPY + "\n")),
        ("helper source", set_(["sources", 1], "def helper(x):\n    return x * 3\n")),
        ("global constexpr", set_(["sources", 2], "TILE = 64")),
        ("extra helper", lambda c: c["sources"].append("def g(): pass")),
        ("source order", lambda c: c["sources"].reverse()),
        ("alignment", set_(["specialization", 0], "*f32")),
        ("dtype", set_(["specialization", 3], "f64")),
        ("constexpr value", set_(["constexprs", "BLOCK"], 128)),
        ("constexpr int vs float", set_(["constexprs", "BLOCK"], 256.0)),
        ("constexpr int vs str", set_(["constexprs", "BLOCK"], "256")),
        ("constexpr bool vs int", set_(["constexprs", "FAST"], 1)),
        ("constexpr None vs 0", set_(["constexprs", "NONE"], 0)),
        ("constexpr float", set_(["constexprs", "SCALE"], 0.5000000000000001)),
        ("constexpr added", set_(["constexprs", "NEW"], 1)),
        ("constexpr renamed", lambda c: c["constexprs"].__setitem__("block", c["constexprs"].pop("BLOCK"))),
        ("target", set_(["target"], "sm_100a")),
        ("target suffix", set_(["target"], "sm_90")),
        ("option", set_(["options", "num_warps"], 8)),
        ("option added", set_(["options", "fast_math"], True)),
        ("component added", set_(["debug"], False)),
        ("component removed", lambda c: c.pop("options")),
    ]


@pytest.mark.parametrize("name,mutate", _mutations(), ids=[n for n, _ in _mutations()])
def test_every_component_changes_the_key(name, mutate):
    base = components()
    changed = copy.deepcopy(base)
    mutate(changed)
    assert canonical_json(changed) != canonical_json(base)  # (256 == 256.0 in Python)
    assert cache_key(changed) != cache_key(base)


def test_all_mutations_give_distinct_keys():
    keys = set()
    for _name, mutate in _mutations():
        c = components()
        mutate(c)
        keys.add(cache_key(c))
    assert len(keys) == len(_mutations())


@pytest.mark.parametrize("bad", [
    (1, 2), {1, 2}, b"bytes", object(), 1 + 2j, Path("/x"), {1: "int key"},
    [1, (2, 3)], {"nested": {"deep": [object()]}},
])
def test_unsupported_values_raise_type_error(bad):
    with pytest.raises(TypeError, match="cache_key"):
        cache_key({"constexprs": bad})


def test_type_error_names_the_location():
    with pytest.raises(TypeError, match=r"components\['constexprs'\]\['SHAPE'\] is a tuple"):
        cache_key({"constexprs": {"SHAPE": (128, 64)}})


def test_components_must_be_a_dict():
    with pytest.raises(TypeError):
        cache_key([1, 2])


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=6))
def test_key_is_a_function_of_the_value(c):
    assert cache_key(c) == cache_key(copy.deepcopy(c))
    assert cache_key(c) == cache_key(dict(reversed(list(c.items()))))
