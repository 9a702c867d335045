"""A run folder as the zip the site's import takes (kernel files, eval_results.json and
generation_config.yaml; anything else in the folder stays home)."""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

from kbl.errors import UsageError

KERNEL_NAME = re.compile(r"^level_\d+_problem_\d+_sample_\d+_kernel\.py$")
EXTRA_NAMES = ("eval_results.json", "generation_config.yaml")


def zip_folder(folder: Path) -> bytes:
    buffer = io.BytesIO()
    count = 0
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.iterdir()):
            if path.is_file() and not path.is_symlink() and (KERNEL_NAME.match(path.name) or path.name in EXTRA_NAMES):
                archive.write(path, f"{folder.name}/{path.name}")
                count += KERNEL_NAME.match(path.name) is not None
    if not count:
        raise UsageError(f"{folder} holds no level_<L>_problem_<P>_sample_<S>_kernel.py files")
    return buffer.getvalue()


def read_upload(path: Path) -> tuple[str, bytes]:
    """(file name, bytes) to upload for a run folder or a zip."""
    if path.is_dir():
        return f"{path.name}.zip", zip_folder(path)
    if path.is_file() and path.suffix in (".zip", ".json"):
        return path.name, path.read_bytes()
    raise UsageError(f"{path}: not a run folder, .zip or .json")
