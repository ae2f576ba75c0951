"""The docstring examples of tylo's modules run as tests (issue 10 item 6): the seed's host-side
examples (``partition(transfer, view).address == (64 << 16) + 32``, layouts printing as
``(128,128):(1,128)``) are documentation that must stay true."""
import doctest
import importlib
import pkgutil

import pytest

import tylo

_SKIP = ("tylo.__main__",)  # running it starts the command line


def _modules():
    names = []
    for info in pkgutil.walk_packages(tylo.__path__, "tylo."):
        if info.name not in _SKIP:
            names.append(info.name)
    return sorted(names)


def _examples(module):
    return [t for t in doctest.DocTestFinder().find(module) if t.examples]


MODULES_WITH_EXAMPLES = [name for name in _modules() if _examples(importlib.import_module(name))]


@pytest.mark.parametrize("name", MODULES_WITH_EXAMPLES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in _examples(module):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples of {name} failed"


def test_the_language_modules_have_examples():
    """lang/ and layouts/ document their plans with examples; losing them all would be a regression."""
    count = sum(len(t.examples) for name in MODULES_WITH_EXAMPLES if name.startswith(("tylo.lang", "tylo.layouts"))
                for t in _examples(importlib.import_module(name)))
    assert count >= 40, count
