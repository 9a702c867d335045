"""Where the evaluation package lies: the sandboxed processes import it from there (its parent goes
on their path) and its digest is taken over its files."""

from __future__ import annotations

import os

#: The package's own folder (evaluation/).
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
#: The folder that holds it: what a fresh interpreter puts on sys.path to import `evaluation`.
PACKAGE_PARENT = os.path.dirname(PACKAGE_DIR)
