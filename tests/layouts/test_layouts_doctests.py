"""Run the docstring examples of every tylo.layouts module."""

import doctest
import importlib

import pytest

MODULES = ["inttuple", "layout", "algebra", "window", "recognise", "ownership", "plans"]


@pytest.mark.parametrize("name", MODULES)
def test_module_doctests(name):
    mod = importlib.import_module(f"tylo.layouts.{name}")
    import tylo.layouts as L

    res = doctest.testmod(mod, extraglobs={k: getattr(L, k) for k in L.__all__}, optionflags=doctest.ELLIPSIS)
    assert res.failed == 0
