"""The starter catalogue: problems written for this project in KernelBench's format.

Layout: ``level1/`` … ``level4/``, each holding ``<number>_<Name>.py`` (numbers 1-based per level,
not zero-padded). Every file defines ``class Model(nn.Module)``, ``get_inputs()`` and
``get_init_inputs()``; sizes scale with the ``KB_SCALE`` environment variable (default 1, sized
for a CPU). See ``README.md`` beside this file.

This package imports nothing but ``pathlib``: importing it must not pull in torch or Django.
"""

from __future__ import annotations

import pathlib

CATALOGUE_DIR: pathlib.Path = pathlib.Path(__file__).resolve().parent

__all__ = ["CATALOGUE_DIR"]
