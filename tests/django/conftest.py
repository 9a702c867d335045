import json
from pathlib import Path

import pytest
from django.core.management import call_command

from tests.sources import PROBLEM_SOURCE


def write_checkout(root: Path, files: dict[str, str]) -> Path:
    """A KernelBench-shaped checkout: root/KernelBench/levelN/<file> for each 'levelN/<file>' key."""
    for relative, source in files.items():
        path = root / "KernelBench" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return root


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    return write_checkout(
        tmp_path,
        {
            "level1/1_Square_matrix_multiplication_.py": PROBLEM_SOURCE,
            "level1/2_Standard_matrix_multiplication_.py": PROBLEM_SOURCE.replace("N = 64", "N = 32"),
            "level2/1_Conv2D_ReLU_BiasAdd.py": PROBLEM_SOURCE.replace("torch.matmul(a, b)", "torch.relu(a + b)"),
        },
    )


@pytest.fixture
def imported_checkout(db, checkout: Path) -> Path:
    call_command("import_problems", str(checkout), stdout=open("/dev/null", "w"))
    return checkout


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data))
    return path
