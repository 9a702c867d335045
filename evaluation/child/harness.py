"""Entry point of a sandboxed evaluation process (reference or kernel).

Started by evaluation.sandbox.sandbox as ``python -I -c "...main()" SPEC_JSON``, possibly as PID 1 of new PID,
network and mount namespaces and still as root. It first finishes its own confinement (mounts,
rlimits, unprivileged uid, no_new_privs), then imports torch, captures the clock functions it
will use, loads the problem (and, in the kernel role, the untrusted kernel) and serves requests
from its parent: one JSON line in on the command pipe, one JSON line out on the reply pipe.
Outputs travel as files written with torch.save into the process's own work directory.

Nothing in this process is trusted by the parent for a verdict: the parent compares outputs with
those of the reference process itself and checks every reported time against its own clock.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import os
import platform
import socket
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable
from typing import Any

from evaluation.child import clock, failures, harness_guard, poison, timing_requests
from evaluation.child.clock import audit, perf_counter_ns
from evaluation.child.confine import confine
from evaluation.child.device_setup import DeviceSetup
from evaluation.child.failures import LazyTensorError, classify_exception, one_line
from evaluation.child.timing_requests import TimingRequests, tensor_bytes
from evaluation.instruments import determinism, precision, profile, roofline, shapes
from evaluation.phases.compare import compare_outputs
from evaluation.results.hardware import _nvidia_driver, cpu_name
from evaluation.sandbox import cuda_ipc
from evaluation.sandbox.host_errors import INFRASTRUCTURE_ERROR, host_error, killed_build
from evaluation.sandbox.protocol import (
    BuildRequest,
    CompareRequest,
    CorrectRequest,
    DeviceRequest,
    EstimateRequest,
    ExitRequest,
    ExportFileRequest,
    InstrumentRequest,
    LoadRequest,
    OpenDeviceRequest,
    PlaceRequest,
    PrepareRequest,
    SettleRequest,
    TimeRequest,
    parse_request,
)

TIMER_OWNERS = ("time", "torch.cuda", "torch.cuda.Event", "torch._C._CudaEventBase", "torch.cuda.Stream")


# --------------------------------------------------------------------------------------------
# Channel
# --------------------------------------------------------------------------------------------


class Channel:
    def __init__(self, cmd_fd: int, resp_fd: int) -> None:
        self._in = os.fdopen(cmd_fd, "rb", buffering=0)
        self._resp_fd = resp_fd
        self._buf = b""

    def recv(self) -> dict[str, Any] | None:
        while b"\n" not in self._buf:
            chunk = os.read(self._in.fileno(), 1 << 16)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def send(self, msg: dict[str, Any]) -> None:
        data = (json.dumps(msg, default=str) + "\n").encode()
        view = memoryview(data)
        while view:
            n = os.write(self._resp_fd, view)
            view = view[n:]


# --------------------------------------------------------------------------------------------
# The harness proper
# --------------------------------------------------------------------------------------------


class Harness(TimingRequests, DeviceSetup):
    def __init__(self, spec: dict[str, Any], confinement: dict[str, Any]) -> None:
        self.spec = spec
        self.role = spec["role"]
        self.device = spec["device"]
        self.disabled = set(spec.get("disable", []))
        self.confinement = confinement
        self.flags: dict[str, str] = {}
        self.gc_hits: set[str] = set()
        self.prev_out_ptrs: list[int] = []
        self.prev_out_ref: Any = None
        self._shared: cuda_ipc.SharedBuffer | None = None
        self.ipc_error: str | None = None
        self._first_places: list[Any] | None = None  # the model's tensors where they were made (_re_place)
        self._place_pad: Any = None
        self._device_open = False
        self._device_open_s = 0.0
        self._opened_now = False  # the device was opened for the request being answered
        fd = spec.get("fd_sock")
        self.fd_sock = socket.socket(fileno=fd) if isinstance(fd, int) else None

    # -- setup ---------------------------------------------------------------------------------
    def import_torch(self) -> None:
        import torch  # deferred: imported only once the process is confined (and it is heavy)

        self.torch = torch
        self.threading = threading
        torch.set_grad_enabled(False)
        torch.backends.cudnn.benchmark = False  # the same, deterministic algorithm choice in every process
        if "KB_TORCH_THREADS" in os.environ:
            torch.set_num_threads(int(os.environ["KB_TORCH_THREADS"]))
        self._sync = lambda: None
        self.timer_fn = perf_counter_ns

    def snapshot_torch(self) -> dict[tuple[str, str], Any]:
        torch = self.torch
        owners: list[tuple[str, Any]] = [
            ("time", time),
            ("torch", torch),
            ("torch.nn.functional", torch.nn.functional),
            ("torch.linalg", torch.linalg),
            ("torch.fft", torch.fft),
            ("torch.special", torch.special),
            ("torch.Tensor", torch.Tensor),
            ("torch._C.TensorBase", torch.Tensor.__mro__[1]),
            ("torch.nn.Module", torch.nn.Module),
            ("torch.cuda", torch.cuda),
        ]
        if self.device == "cuda":
            owners += [("torch.cuda.Event", torch.cuda.Event), ("torch._C._CudaEventBase", torch._C._CudaEventBase),
                       ("torch.cuda.Stream", torch.cuda.Stream)]
        for name, obj in list(vars(torch.nn).items()):
            if isinstance(obj, type) and issubclass(obj, torch.nn.Module) and obj is not torch.nn.Module:
                owners.append((f"torch.nn.{name}", obj))
        snap: dict[tuple[str, str], Any] = {}
        self._owners = owners
        for oname, owner in owners:
            for key, value in list(vars(owner).items()):
                if callable(value) or isinstance(value, (staticmethod, classmethod, property)):
                    snap[(oname, key)] = value
        return snap

    def check_patches(self) -> None:
        """Kernel role: flag functions of torch/time that differ from the snapshot taken at load."""
        if "torch_patch_check" in self.disabled:
            return
        changed = self._changed_attributes()
        if not changed or self.role != "kernel":
            return
        timers = [c for c in changed if c.split(".")[0] == "time" or c.startswith(TIMER_OWNERS[1:])
                  and any(k in c for k in ("synchron", "Event", "elapsed", "record", "current_stream", "Stream"))]
        others = [c for c in changed if c not in timers]
        if timers:
            self.flags["patched_timer"] = "kernel replaced clock/synchronisation functions: " + ", ".join(sorted(set(timers))[:8])
        if others:
            self.flags["reference_patched"] = "kernel monkey-patched torch: " + ", ".join(sorted(set(others))[:8])

    def _changed_attributes(self) -> list[str]:
        changed = []
        for oname, owner in self._owners:
            current = vars(owner)
            for key, value in list(current.items()):
                old = self._snap.get((oname, key), None)
                if old is not None and value is not old and not _torch_own_wrapper(self.torch, value, old):
                    changed.append(f"{oname}.{key}")
            for (_o2, key), _old in self._snap_keys_by_owner.get(oname, []):
                if key not in current:
                    changed.append(f"{oname}.{key} (deleted)")
        # Attributes set on torch.Tensor that shadow TensorBase methods count as patches too.
        tensor_dict = vars(self.torch.Tensor)
        for (oname, key) in self._snap:
            if oname == "torch._C.TensorBase" and key in tensor_dict and ("torch.Tensor", key) not in self._snap:
                changed.append(f"torch.Tensor.{key}")
        return changed

    def install_gc_watch(self) -> None:
        if "gc_check" in self.disabled:
            return
        hits = self.gc_hits
        for name in ("get_objects", "get_referrers", "get_referents"):
            orig = getattr(gc, name)

            def wrapper(*a: Any, __orig: Any = orig, __name: str = name, **k: Any) -> Any:
                hits.add(f"gc.{__name}")
                return __orig(*a, **k)

            setattr(gc, name, wrapper)

    def _exec_module(self, name: str, path: str) -> Any:
        with open(path, encoding="utf-8") as fh:
            src = fh.read()
        mod = types.ModuleType(name)
        mod.__file__ = path
        sys.modules[name] = mod
        exec(compile(src, path, "exec"), mod.__dict__)
        return mod

    def _problem(self) -> Any:
        """The problem module, executed once."""
        if getattr(self, "problem_module", None) is None:
            problem = self._exec_module("kb_problem", self.spec["problem_path"])
            for attr in ("Model", "get_inputs", "get_init_inputs"):
                if not hasattr(problem, attr):
                    raise AttributeError(f"problem file defines no {attr}")
            self.problem_module = problem
        return self.problem_module

    def estimate(self, req: EstimateRequest) -> dict[str, Any]:
        """Bytes of one set of inputs, of the model's parameters and of its outputs, found by running
        get_inputs(), the constructor and forward on the meta device (nothing is allocated); -1 for
        what does not run there (e.g. code that moves tensors to a device itself, or data-dependent
        shapes). With ``req.sizes`` False (the parent knows them), the card's free memory alone."""
        if not req.sizes:
            return {"ok": True, **self._device_free()}
        torch = self.torch
        problem = self._problem()
        sizes = {"input_bytes": -1, "param_bytes": -1, "output_bytes": -1}
        try:
            torch.manual_seed(0)
            with torch.device("meta"):
                inputs = list(problem.get_inputs())
                sizes["input_bytes"] = tensor_bytes(torch, inputs)
                model = problem.Model(*problem.get_init_inputs())
                params = list(model.parameters()) + list(model.buffers()) if isinstance(model, torch.nn.Module) else []
                sizes["param_bytes"] = tensor_bytes(torch, params)
                out = model(*inputs)
                sizes["output_bytes"] = tensor_bytes(torch, list(out) if isinstance(out, (tuple, list)) else [out])
        except Exception as exc:  # noqa: BLE001 - problem code
            return {"ok": True, **sizes, "error": one_line(exc), **self._device_free()}
        return {"ok": True, **sizes, **self._device_free()}

    def _device_free(self) -> dict[str, int]:
        """The GPU's free memory now, before any of the problem's tensors is made on it."""
        if self.device != "cuda":
            return {}
        free, _total = self.torch.cuda.mem_get_info()
        return {"device_free_bytes": int(free)}

    def _pin(self, cpus: Any) -> None:
        """Pin every thread of this process to ``cpus`` (the parent gives every process of an
        evaluation the same cores: they take turns on them)."""
        if not cpus:
            return
        mask = {int(c) for c in cpus}
        for tid in os.listdir("/proc/self/task"):
            try:
                os.sched_setaffinity(int(tid), mask)
            except OSError:
                pass

    def load(self, req: LoadRequest) -> dict[str, Any]:
        torch = self.torch
        self._pin(req.cpus)
        # The run's precision: models and floating-point inputs in this dtype (None: float32, as built).
        self.dtype = getattr(torch, req.dtype) if req.dtype != "float32" else None
        t0 = perf_counter_ns()
        problem = self._problem()
        self.get_inputs = problem.get_inputs
        self.get_init_inputs = problem.get_init_inputs
        t_problem = perf_counter_ns()
        # Both roles take the snapshot and run the same checks, so that the bookkeeping the parent's
        # clock sees is the same in both processes (only the kernel's findings are reported).
        self._snap = self.snapshot_torch()
        self._snap_keys_by_owner: dict[str, list[Any]] = {}
        for (o, k), v in self._snap.items():
            self._snap_keys_by_owner.setdefault(o, []).append(((o, k), v))
        self.install_gc_watch()
        self._seal()
        if self.role == "kernel":
            try:
                kernel = self._exec_module("kb_kernel", self.spec["kernel_path"])
            except BaseException as exc:  # noqa: BLE001 - untrusted code
                # A build on a full disk, or a compiler killed from outside: the host's, no verdict.
                kind = INFRASTRUCTURE_ERROR if host_error(exc) or killed_build(exc) else "compile_error"
                return {"ok": False, "kind": kind, "error": one_line(exc), "traceback": traceback.format_exc()}
            if not hasattr(kernel, "ModelNew"):
                return {"ok": False, "kind": "compile_error", "error": "kernel file defines no class ModelNew",
                        "traceback": ""}
            cls = kernel.ModelNew
        else:
            cls = problem.Model
        t_import = perf_counter_ns()
        self.model_cls, self.init_seed = cls, int(req.init_seed)
        try:
            self.model = self._construct()
        except BaseException as exc:  # noqa: BLE001
            kind = "compile_error" if self.role == "kernel" else "runtime_error"
            if classify_exception(exc) in ("crashed", INFRASTRUCTURE_ERROR):
                kind = classify_exception(exc)
            return {"ok": False, "kind": kind, "error": one_line(exc), "traceback": traceback.format_exc()}
        t_init = perf_counter_ns()
        self.check_patches()
        info: dict[str, Any] = {
            "ok": True,
            "problem_s": (t_problem - t0) / 1e9,
            "import_s": (t_import - t_problem) / 1e9,
            "init_s": (t_init - t_import) / 1e9,
            "flags": self.take_flags(),
        }
        if self.role == "reference":
            info["environment"] = self.environment()
        return info

    def _construct(self) -> Any:
        """The model (reference or kernel) from get_init_inputs() under the load's seed, on the device."""
        torch = self.torch
        torch.manual_seed(self.init_seed)
        init_inputs = self._cast(list(self.get_init_inputs()))
        torch.manual_seed(self.init_seed)
        with torch.device(self.device):
            model = self.model_cls(*init_inputs)
        if isinstance(model, torch.nn.Module):
            model = model.to(self.device) if self.dtype is None else model.to(self.device, self.dtype)
        self._sync()
        return model

    def build(self, req: BuildRequest) -> dict[str, Any]:
        """Build role (no GPU visible): import the kernel module, which compiles what it loads with
        ``torch.utils.cpp_extension``. A failure inside that module is the compiler's (``compile_error``);
        any other (e.g. the module touches the GPU at import) leaves the rest to the GPU phase."""
        t0 = perf_counter_ns()
        try:
            self._exec_module("kb_kernel", self.spec["kernel_path"])
        except BaseException as exc:  # noqa: BLE001 - untrusted code
            tb = exc.__traceback__
            in_compiler = False
            while tb is not None:
                in_compiler = in_compiler or "cpp_extension" in tb.tb_frame.f_code.co_filename
                tb = tb.tb_next
            # A compiler that met a full disk is the host's failure: never recorded as the kernel's
            # compile error; the GPU phase imports the module again and judges (evaluation.sandbox.host_errors).
            # A compiler killed by a signal (out-of-memory killer, operator) is no verdict at all.
            kind = "compile_error" if in_compiler and not host_error(exc) else "deferred"
            if killed_build(exc):
                kind = INFRASTRUCTURE_ERROR
            return {"ok": False, "kind": kind, "error": one_line(exc),
                    "traceback": traceback.format_exc(), "import_s": (perf_counter_ns() - t0) / 1e9}
        return {"ok": True, "import_s": (perf_counter_ns() - t0) / 1e9}

    def environment(self) -> dict[str, Any]:
        torch = self.torch
        env: dict[str, Any] = {
            "device": self.device,
            "torch": torch.__version__,
            "python": platform.python_version(),
            "cuda": torch.version.cuda,
            "cpu": platform.processor() or platform.machine(),
            "torch_threads": torch.get_num_threads(),
        }
        if self.device == "cuda":
            env["device_name"] = torch.cuda.get_device_name(0)
            props = torch.cuda.get_device_properties(0)
            env["sm_count"] = props.multi_processor_count
            env["capability"] = f"{props.major}.{props.minor}"
            env["driver"] = _nvidia_driver()
        else:
            env["device_name"] = cpu_name()
            env["driver"] = None
        return env

    # -- running -------------------------------------------------------------------------------
    def gen_inputs(self, seed: int) -> list[Any]:
        prepared = self.__dict__.get("_prepared")
        if prepared and seed in prepared:
            return prepared.pop(seed)
        if "fresh_inputs" in self.disabled:  # test-only: reuse the very same tensors, as naive harnesses do
            cache = self.__dict__.setdefault("_input_cache", {})
            if seed not in cache:
                cache[seed] = self._make_inputs(seed)
            return cache[seed]
        return self._make_inputs(seed)

    def _make_inputs(self, seed: int) -> list[Any]:
        torch = self.torch
        torch.manual_seed(seed)
        with torch.device(self.device):
            inputs = list(self.get_inputs())
        return self._cast([x.to(self.device) if isinstance(x, torch.Tensor) else x for x in inputs])

    def _cast(self, values: list[Any]) -> list[Any]:
        """Floating-point tensors in the run's precision, as KernelBench casts them (integer tensors,
        such as indices, keep their dtype)."""
        dtype = getattr(self, "dtype", None)
        if dtype is None:
            return values
        torch = self.torch
        return [x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in values]

    def flatten(self, out: Any) -> list[Any]:
        torch = self.torch
        items = list(out) if isinstance(out, (tuple, list)) else [out]
        if "type_check" not in self.disabled:
            for t in items:
                if type(t) not in (torch.Tensor, torch.nn.Parameter):
                    raise LazyTensorError(
                        f"output is {type(t).__module__}.{type(t).__qualname__}, not a plain torch.Tensor"
                    )
                if t.device.type != self.device or t.is_meta:
                    raise LazyTensorError(f"output is on device {t.device}, expected {self.device}")
        return items

    def _threads(self) -> set[Any]:
        return set(self.threading.enumerate())

    def _check_threads(self, before: set[Any]) -> None:
        if "thread_check" in self.disabled:
            return
        extra = [t for t in self._threads() - before if t.is_alive()]
        if extra and self.role == "kernel":
            self.flags["unjoined_thread"] = (
                f"kernel left {len(extra)} Python thread(s) running after returning ({extra[0].name})"
            )

    def _seal(self) -> None:
        """Before the kernel is imported: the clock and the GPU's timing objects become read-only
        (their values live in a closure, not in this object), and an audit hook starts watching what
        the kernel's code does to this process (evaluation.child.harness_guard). Both roles, so that the
        bookkeeping the parent's clock sees is the same in both."""
        if "timer_capture" in self.disabled:  # test-only: the clock looked up at call time, as naive harnesses do
            self.timer_fn = lambda: time.perf_counter_ns()
        if "harness_guard" in self.disabled:
            return
        _lock_sealed()
        # The modules whose globals the harness's code reads: its own, its timing half's, its clock's, its
        # failures' and its poison's (a kernel that rewrites one of them is found as if it rewrote this one).
        modules = (sys.modules[__name__], timing_requests, clock, failures, poison)
        harness_guard.install(self, modules, str(self.spec.get("kernel_path") or ""), SEALED)

    def _check_guard(self) -> None:
        """Whether the harness's objects are still the ones sealed at load, and what the hook saw
        the kernel's code do since the last request (only the kernel's findings are reported)."""
        try:
            audit(harness_guard.CHECK_EVENT, self)
        except harness_guard.Tampered as found:
            if self.role == "kernel":
                for code, message in found.findings:
                    self.flags.setdefault(code, message)

    def _check_gc(self) -> None:
        if self.gc_hits:
            self.flags["harness_memory_access"] = "kernel called " + ", ".join(sorted(self.gc_hits))

    def take_flags(self) -> dict[str, str]:
        self._check_guard()
        self._check_gc()
        out, self.flags = self.flags, {}
        return out

    def correctness(self, req: CorrectRequest) -> dict[str, Any]:
        torch = self.torch
        self._release_shared()
        inputs = self.gen_inputs(int(req.seed))
        tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
        pristine = [x.clone() for x in tensors] if self.role == "kernel" else []
        before = self._threads()
        t0 = perf_counter_ns()
        try:
            with self._poisoned(req):
                outs = self.flatten(self.model(*inputs))
                self._sync()
            snapshot = self._snapshot(outs) if self.role == "kernel" else None
        except BaseException as exc:  # noqa: BLE001
            return self._call_failed(exc)
        run_s = (perf_counter_ns() - t0) / 1e9
        if self.role == "reference":
            self.last_seed = int(req.seed)  # the fp64 reference (instruments) runs on these inputs again
            return self._reference_outputs(req, outs, run_s)
        self._kernel_checks(before, pristine, tensors, outs)
        return {"ok": True, "run_s": run_s, "flags": self.take_flags(), **self._hand_out(snapshot, int(req.trial))}

    def _poisoned(self, req: CorrectRequest) -> contextlib.AbstractContextManager[None]:
        """Kernel role, in the calls the parent asks it for (``req.poison``): memory the kernel's call
        leaves unwritten reads as NaN (evaluation.child.poison), so its verdict never depends on what
        the allocator's recycled blocks held. The reference's call, the snapshot and the timed calls
        run as they are."""
        if self.role == "kernel" and req.poison:
            return poison.poison_unwritten(self.torch)
        return contextlib.nullcontext()

    def _snapshot(self, outs: list[Any]) -> Any:
        """Kernel role: the outputs as they are at return, out of the kernel's hands: on the GPU a
        device-to-device copy into a buffer shared with the reference (cuda_ipc), else a host copy."""
        if self.device == "cuda" and self.fd_sock is not None and "gpu_compare" not in self.disabled:
            try:
                self._shared, layout = cuda_ipc.export_outputs(self.torch, outs, self.torch.cuda.current_device())
                return {"layout": layout}
            except (cuda_ipc.IpcError, OSError) as exc:
                self.ipc_error = str(exc)
        return [o.detach().to("cpu", copy=True) for o in outs]

    def _hand_out(self, snapshot: Any, trial: int) -> dict[str, Any]:
        if isinstance(snapshot, dict) and self._shared is not None and self.fd_sock is not None:
            fd = self._shared.export_fd()
            try:
                cuda_ipc.send_fd(self.fd_sock, fd)
            finally:
                os.close(fd)
            return {"ipc_layout": snapshot["layout"]}
        path = os.path.join(self.spec["workdir"], f"out_{trial}.pt")
        self.torch.save(snapshot, path)
        return {"file": os.path.basename(path), "ipc_error": self.ipc_error}

    def export_file(self, req: ExportFileRequest) -> dict[str, Any]:
        """Kernel role: write the last shared snapshot to a file (when the reference could not map it)."""
        torch = self.torch
        if self._shared is None:
            return {"ok": False, "kind": "runtime_error", "error": "no shared outputs to export"}
        outs = []
        for e in req.layout:
            raw = self._shared.tensor[int(e["offset"]):int(e["offset"]) + int(e["nbytes"])]
            outs.append(raw.view(getattr(torch, e["dtype"])).reshape(e["shape"]).to("cpu", copy=True))
        self._release_shared()
        path = os.path.join(self.spec["workdir"], f"out_{int(req.trial)}.pt")
        torch.save(outs, path)
        return {"ok": True, "file": os.path.basename(path)}

    def _release_shared(self) -> None:
        if self._shared is not None:
            self._shared.free()
            self._shared = None

    def _kernel_checks(self, before: set[Any], pristine: list[Any], tensors: list[Any], outs: list[Any]) -> None:
        self._check_threads(before)
        for a, b in zip(pristine, tensors, strict=False):
            if not _same_tensor(self.torch, a, b):
                self.flags["input_mutation"] = "kernel modified its input tensors in place"
                break
        in_ptrs = {x.untyped_storage().data_ptr() for x in tensors if x.numel()}
        out_ptrs = [o.untyped_storage().data_ptr() for o in outs if o.numel()]
        if any(p in in_ptrs for p in out_ptrs):
            self.flags["output_reuse"] = "kernel returned (a view of) one of its inputs"
        if self.prev_out_ref is not None and any(p in self.prev_out_ptrs for p in out_ptrs):
            self.flags["output_reuse"] = "kernel returned the same output buffer on consecutive calls"
        self.prev_out_ref = outs
        self.prev_out_ptrs = out_ptrs
        self.check_patches()

    def _reference_outputs(self, req: CorrectRequest, outs: list[Any], run_s: float) -> dict[str, Any]:
        if req.save:  # check-problem: the parent wants the values
            snapshot = [o.detach().to("cpu", copy=True) for o in outs]
            path = os.path.join(self.spec["workdir"], f"out_{int(req.trial)}.pt")
            self.torch.save(snapshot, path)
            return {"ok": True, "file": os.path.basename(path), "run_s": run_s, "flags": {}}
        self.last_outs = [o.detach() for o in outs]
        return {"ok": True, "run_s": run_s, "dtypes": [str(o.dtype).replace("torch.", "") for o in outs],
                "spot": self._spot(outs, req.spot_seed), "flags": {}}

    def compare(self, req: CompareRequest) -> dict[str, Any]:
        """Reference role only: compare the kernel's outputs (a shared GPU buffer whose descriptor the
        parent passed on, or a file the parent handed over) with ours."""
        if self.role != "reference":
            raise RuntimeError("compare runs in the reference process only")
        if req.ipc_layout is not None:
            theirs, failure = self._import_shared(req.ipc_layout)
        else:
            theirs, failure = self._load_file(str(req.file))
        if failure is not None:
            return failure
        if not isinstance(theirs, list) or not all(type(t) is self.torch.Tensor for t in theirs):
            return {"ok": False, "kind": "incorrect", "error": "kernel outputs are not a list of plain tensors"}
        cmp = compare_outputs(self.last_outs, theirs, req.atol, req.rtol,
                              scale_check=bool(req.scale_check))
        reply: dict[str, Any] = {"ok": True, "comparison": dataclasses.asdict(cmp)}
        if req.fingerprint:
            reply["fingerprint"] = determinism.fingerprint(self.torch, theirs)
        if req.fp64:
            inputs = self.gen_inputs(self.last_seed)
            reply["fp64"] = precision.fp64_errors(self.torch, self.model, inputs, self.last_outs, theirs)
        del theirs
        return reply

    def instrument(self, req: InstrumentRequest) -> dict[str, Any]:
        """The reviewer's instruments (evaluation/instruments/): what this process measures of itself."""
        what, torch = req.what, self.torch
        if what == "modes":
            return {"ok": True, "data": precision.math_modes(torch)}
        if what == "profile":
            inputs = self.gen_inputs(int(req.seed))
            data = profile.profile_forward(torch, lambda: (self.flatten(self.model(*inputs)), self._sync()),
                                           self.device, self.spec["workdir"])
            return {"ok": True, "data": data}
        if what == "size_constants":
            return {"ok": True, "data": shapes.size_constants(self._problem())}
        if what == "sizes":  # set sizes (empty: the originals) and rebuild the model
            self._release_shared()
            shapes.apply_sizes(self._problem(), dict(req.sizes), self.__dict__.setdefault("_sizes0", {}))
            self.model = None
            self.model = self._construct()
            return {"ok": True, "data": {}, "flags": self.take_flags()}
        if what == "bandwidth" and self.role == "reference" and self.device == "cpu":
            return {"ok": True, "data": {"bytes_per_s": roofline.copy_bandwidth(torch, perf_counter_ns)}}
        if what == "work" and self.role == "reference":
            return {"ok": True, "data": roofline.minimum_work(torch, self._problem(), self._cast, self._work_on_device)}
        return {"ok": False, "kind": "runtime_error", "error": f"unknown instrument {what!r}"}

    def _work_on_device(self) -> tuple[Any, list[Any]]:
        return self.model, self.gen_inputs(0)

    def _import_shared(self, layout: Any) -> tuple[Any, dict[str, Any] | None]:
        if self.fd_sock is None:
            return None, {"ok": False, "kind": "ipc_failed", "error": "no descriptor channel"}
        try:
            fd = cuda_ipc.recv_fd(self.fd_sock)
        except (OSError, cuda_ipc.IpcError) as exc:
            return None, {"ok": False, "kind": "ipc_failed", "error": one_line(exc)}
        try:
            return cuda_ipc.import_outputs(self.torch, fd, layout, self.torch.cuda.current_device()), None
        except (cuda_ipc.IpcError, KeyError, TypeError, ValueError, RuntimeError) as exc:
            return None, {"ok": False, "kind": "ipc_failed", "error": one_line(exc)}
        finally:
            os.close(fd)

    def _load_file(self, name: str) -> tuple[Any, dict[str, Any] | None]:
        path = os.path.join(self.spec["workdir"], os.path.basename(name))
        try:
            return self.torch.load(path, map_location=self.device, weights_only=True, mmap=True), None
        except Exception as exc:  # noqa: BLE001 - untrusted file
            return None, {"ok": False, "kind": "incorrect",
                          "error": f"kernel outputs could not be loaded: {one_line(exc)}"}
        finally:
            try:
                os.unlink(path)
            except OSError:
                pass

    def _spot(self, outs: list[Any], spot_seed: Any) -> list[list[float]]:
        torch = self.torch
        spot: list[list[float]] = []
        if spot_seed is None or outs is None:
            return spot
        g = torch.Generator().manual_seed(int(spot_seed))
        for o in outs:
            flat = o.detach().reshape(-1)
            n = flat.numel()
            if n == 0:
                spot.append([])
                continue
            idx = torch.randint(0, n, (min(64, n),), generator=g)
            spot.append(flat[idx.to(flat.device)].double().cpu().tolist())
        return spot



def _torch_own_wrapper(torch: Any, value: Any, old: Any) -> bool:
    """Whether ``value`` is torch's own ``_disable_dynamo`` wrapper around ``old``, as torch installs it
    on itself (``torch.manual_seed`` is replaced when ``torch._dynamo`` is first imported, by the
    profiler or a kernel's ``torch.compile``): torch's code, torch's globals, the original inside. Such
    a replacement runs the original, so it is no patch of the kernel's making; anything else is."""
    if not _torch_code_around(value, "torch._compile", "inner", old):
        return False
    # The wrapper calls what the original carries as ``__dynamo_disable`` (torch sets it, on first
    # use, to dynamo's disabled copy of the original): that too must be torch's code around it.
    disabled = getattr(old, "__dynamo_disable", None)
    return disabled is None or _torch_code_around(disabled, "torch._dynamo.eval_frame", "_fn", old)


def _torch_code_around(value: Any, module: str, name: str, old: Any) -> bool:
    """``value`` is a function of torch's module ``module`` named ``name``, run in that module's own
    globals, whose only function in its closure is ``old`` (a copy of its code with other globals or
    cells is not)."""
    mod = sys.modules.get(module)
    code = getattr(value, "__code__", None)
    if mod is None or code is None or getattr(value, "__globals__", None) is not vars(mod):
        return False
    if code.co_filename != mod.__file__ or code.co_name != name:
        return False
    cells = [c.cell_contents for c in (getattr(value, "__closure__", None) or ()) if _cell_filled(c)]
    return [c for c in cells if isinstance(c, types.FunctionType)] == [old]


def _cell_filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


#: The harness's clock and GPU timing objects (harness_guard.SEALED, where the hook also reads them):
#: read-only properties once the kernel is imported; an assignment to them from the kernel's code raises.
SEALED = harness_guard.SEALED
_sealed_props, _lock_sealed = harness_guard.sealed_slots(SEALED)
for _name, _prop in _sealed_props.items():
    setattr(Harness, _name, _prop)
del _name, _prop, _sealed_props


def _same_tensor(torch: Any, a: Any, b: Any) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    return bool(torch.equal(a, b))


#: The harness's method serving each request (evaluation.sandbox.protocol); bound once, before the
#: kernel is imported.
HANDLERS = {
    LoadRequest.op: "load", CorrectRequest.op: "correctness", TimeRequest.op: "time_calls", PlaceRequest.op: "place",
    DeviceRequest.op: "device_time", CompareRequest.op: "compare", ExportFileRequest.op: "export_file",
    EstimateRequest.op: "estimate", BuildRequest.op: "build", InstrumentRequest.op: "instrument",
    PrepareRequest.op: "prepare", SettleRequest.op: "settle", OpenDeviceRequest.op: "open_device_request",
}


def main() -> None:
    spec = json.loads(sys.argv[1])
    chan = Channel(spec["cmd_fd"], spec["resp_fd"])
    try:
        confinement = confine(spec)
    except BaseException as exc:  # noqa: BLE001
        chan.send({"ok": False, "kind": "crashed", "error": f"sandbox setup failed: {exc}", "traceback": traceback.format_exc()})
        return
    harness = Harness(spec, confinement)
    t0 = perf_counter_ns()
    try:
        harness.import_torch()
    except BaseException as exc:  # noqa: BLE001
        chan.send({"ok": False, "kind": "crashed", "error": one_line(exc), "traceback": traceback.format_exc()})
        return
    chan.send({"ok": True, "ready": True, "confinement": confinement, "torch_import_s": (perf_counter_ns() - t0) / 1e9,
               "pid": os.getpid()})
    handlers: dict[str, Callable[[Any], dict[str, Any]]] = {op: getattr(harness, name) for op, name in HANDLERS.items()}
    while True:
        msg = chan.recv()
        if msg is None or msg.get("op") == ExitRequest.op:
            break
        try:
            req = parse_request(msg)
            handler = handlers[req.op]
        except KeyError as exc:  # an op this harness does not know (unknown fields are left out)
            chan.send({"ok": False, "kind": "runtime_error", "error": f"malformed request {msg.get('op')!r}: {exc}",
                       "nonce": msg.get("nonce")})
            continue
        try:
            harness.open_device()  # at the first request: no code of the kernel ran before
            reply = handler(req)
        except BaseException as exc:  # noqa: BLE001
            reply = {"ok": False, "kind": classify_exception(exc), "error": one_line(exc),
                     "traceback": traceback.format_exc()}
        reply["nonce"] = msg.get("nonce")
        chan.send(reply)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
