"""``python -m tylo``: the tylo command line (see tylo/cli/)."""

import sys

from tylo.cli import main

if __name__ == "__main__":
    sys.exit(main())
