"""Hardware probe, run in a child process so the caller never initialises CUDA."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from typing import Any

from evaluation.paths import PACKAGE_PARENT

PROBE = "import sys; sys.path.insert(0, {pylib!r}); from evaluation.results.hardware import _probe_main; _probe_main({device!r})"


def hardware_slug(device_name: str, device: str) -> str:
    """A short name for a device class (``h200``, ``h100``, ``a100``, ..., ``cpu``)."""
    if device == "cpu":
        return "cpu"
    m = re.search(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b", device_name.upper().replace("NVIDIA", ""))
    if m:
        return m.group(1).lower()
    return re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-") or device


def _nvidia_driver() -> str | None:
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as fh:
            text = fh.read()
        for tok in text.split():
            if tok.count(".") >= 1 and tok.replace(".", "").isdigit():
                return tok
    except OSError:
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.TimeoutExpired):
        pass
    return None


def _probe_main(device: str) -> None:
    info: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform()}
    try:
        import torch  # deferred: torch is heavy, and only this probe child needs it

        info["torch"] = torch.__version__
        info["cuda"] = torch.version.cuda
        use_cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
        if use_cuda:
            if not torch.cuda.is_available():
                raise RuntimeError("CUDA requested but not available")
            props = torch.cuda.get_device_properties(0)
            info.update(device="cuda", device_name=props.name, device_count=torch.cuda.device_count(),
                        capability=f"{props.major}.{props.minor}", sm_count=props.multi_processor_count,
                        memory_gb=round(props.total_memory / 2**30, 1), driver=_nvidia_driver())
        else:
            info.update(device="cpu", device_name=cpu_name(), driver=None, cpu_count=os.cpu_count(),
                        torch_threads=torch.get_num_threads())
    except Exception as exc:  # noqa: BLE001
        info["error"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(info))


def probe_hardware(device: str = "auto") -> dict[str, Any]:
    """Run the probe in a child Python; return device_name, driver, cuda, torch, python, hardware_slug."""
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError("device must be 'auto', 'cpu' or 'cuda'")
    pylib = PACKAGE_PARENT
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES",
                                                         "CUDA_HOME", "TMPDIR", "LANG")}
    out = subprocess.run([sys.executable, "-I", "-c", PROBE.format(pylib=pylib, device=device)],
                         capture_output=True, text=True, timeout=180, env=env)
    try:
        info = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        info = {"error": (out.stderr or out.stdout).strip()[-500:] or f"probe exited with {out.returncode}"}
    info["hardware_slug"] = hardware_slug(info.get("device_name", ""), info.get("device", "cpu"))
    for key in ("device_name", "driver", "cuda", "torch", "python"):
        info.setdefault(key, None)
    return info


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
