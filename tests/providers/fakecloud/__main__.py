"""Runs the fake provider: `python tests/providers/fakecloud <provider> --record DIR --network CIDR`."""

import sys
from pathlib import Path

# Run as a directory, this file is not part of its package: import the package from beside it.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fakecloud.cli import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
