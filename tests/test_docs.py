"""The examples in docs/*.md run as written (doctest)."""
import doctest
import glob
import os

import pytest

DOCS = sorted(glob.glob(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "*.md")))


@pytest.mark.parametrize("path", DOCS, ids=os.path.basename)
def test_doc_examples(path):
    res = doctest.testfile(path, module_relative=False, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.failed == 0, f"{res.failed} of {res.attempted} examples in {os.path.basename(path)} failed"
