"""Build tylo's native launcher in place (tylo/runtime/_native_launch.abi3.so), for running the
source tree with PYTHONPATH and no install:

    python scripts/build_native.py          # then: PYTHONPATH=$PWD python ...

Needs a C compiler and the Python headers; the module uses the stable ABI (Python 3.10+). Without
it tylo builds the module on first use into $TYLO_CACHE_DIR/native, or launches through ctypes.
``pip install .`` builds the same module (setup.py).
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tylo.runtime import native  # noqa: E402


def main():
    folder = os.path.join(ROOT, "tylo", "runtime")
    target = os.path.join(folder, "_native_launch.abi3.so")
    if os.path.exists(target):
        os.unlink(target)  # build() reuses an existing file: always rebuild here
    path = native.build(folder)
    print(f"built {path}")


if __name__ == "__main__":
    main()
