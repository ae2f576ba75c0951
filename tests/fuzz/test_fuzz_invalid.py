"""Default-run slice of the invalid-kernel corpus: every mutation template once (scripts/fuzz.py
--long --kind invalid applies them to thousands of generated kernels at seeded places).

Each mutant must give a CompileError at the marked line, in words, never "internal compiler error";
signature mistakes must give ValueError/TypeError. Templates that fail today carry their finding.
"""
import pytest
from findings import FINDINGS
from mutations import TEMPLATE_NAMES, TEMPLATES, check_mutant, make_mutant, message_problem

# template -> the finding it fails with on main today (empty: F20-F25 are fixed, findings.FIXED)
KNOWN = {}


@pytest.mark.parametrize("index,template", [
    pytest.param(i, name, marks=pytest.mark.xfail(strict=True, reason=KNOWN[name])) if name in KNOWN
    else (i, name) for i, name in enumerate(TEMPLATE_NAMES)])
def test_mutant_gives_a_clear_compile_error_at_its_line(index, template, tmp_path):
    r = check_mutant(1000 + index, str(tmp_path), template=template)
    assert r["status"] == "ok", f"{template}: {r['status']}: {r['detail']} (expected line {r['lines']}, {r.get('path')})"


def test_known_findings_are_listed():
    assert set(KNOWN.values()) <= set(FINDINGS) and set(KNOWN) <= set(TEMPLATE_NAMES)


def test_corpus_covers_the_categories():
    categories = {t[1] for t in TEMPLATES}
    assert categories == {"arity", "type", "undefined", "runtime_for_constexpr", "constant", "cast", "shared_shape",
                          "constexpr", "syntax", "control_flow"}


def test_mutants_mark_the_inserted_line():
    m = make_mutant(5, "undefined_name")
    lines = m.source.split("\n")
    (line,) = m.lines
    assert "undefined_name" in lines[line - 1]


def test_message_check_rejects_reprs_and_accepts_sentences():
    assert message_problem("module <module 'tylo' from 'x'> has no attribute 'f128'")
    assert message_problem("<object object at 0x7f00> (object) cannot be combined")
    assert message_problem("KeyError")
    assert message_problem("tylo has no dtype f128; the dtypes are i8 ... f64") is None
