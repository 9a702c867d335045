"""GPU memory shared between the two sandboxed processes through a file descriptor (child side).

The kernel process copies its outputs (device to device, right after the call returned) into a
buffer made with CUDA's virtual memory API (``cuMemCreate`` with a POSIX file-descriptor handle),
exports that buffer as a file descriptor and passes it to its parent over a Unix socket
(SCM_RIGHTS); the parent passes it on to the reference process, which maps the buffer, copies
it into memory of its own and compares on the device. Nothing travels through the host, and the
reference's own outputs are never exported. A descriptor works across PID, IPC and user
namespaces and uids (it is not looked up by process id, unlike ``cudaIpcGetMemHandle``).

Uses the driver API through ctypes (libcuda.so.1); torch is handed in by the caller.
"""

from __future__ import annotations

import ctypes
import os
import socket
from typing import Any

_POSIX_FD = 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_PINNED = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
_LOC_DEVICE = 1  # CU_MEM_LOCATION_TYPE_DEVICE
_PROT_RW = 3  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE
ALIGN = 256
MAX_OUTPUTS = 64


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _Prop(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags)]


class _Access(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


class IpcError(RuntimeError):
    pass


class _Driver:
    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libcuda.so.1")

    def __call__(self, name: str, *args: Any) -> None:
        r = getattr(self.lib, name)(*args)
        if r != 0:
            raise IpcError(f"{name} failed (CUresult {r})")


_driver: _Driver | None = None


def _drv() -> _Driver:
    global _driver
    if _driver is None:
        _driver = _Driver()
    return _driver


def _prop(device: int) -> _Prop:
    prop = _Prop()
    prop.type = _PINNED
    prop.requestedHandleTypes = _POSIX_FD
    prop.location = _Location(_LOC_DEVICE, device)
    return prop


class _CudaArray:
    """A raw device range as something torch.as_tensor understands (__cuda_array_interface__)."""

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 3, "strides": None}


class SharedBuffer:
    """A mapped VMM allocation; ``tensor`` is a uint8 view of all of it."""

    def __init__(self, torch: Any, size: int, device: int, fd: int | None = None) -> None:
        drv = _drv()
        prop = _prop(device)
        gran = ctypes.c_size_t()
        drv("cuMemGetAllocationGranularity", ctypes.byref(gran), ctypes.byref(prop), 0)
        g = max(int(gran.value), 1)
        self.size = max(g, (size + g - 1) // g * g)
        self.handle = ctypes.c_ulonglong()
        self.ptr = ctypes.c_ulonglong()
        self._mapped = False
        if fd is None:
            drv("cuMemCreate", ctypes.byref(self.handle), ctypes.c_size_t(self.size), ctypes.byref(prop),
                ctypes.c_ulonglong(0))
        else:
            drv("cuMemImportFromShareableHandle", ctypes.byref(self.handle), ctypes.c_void_p(fd), _POSIX_FD)
        try:
            drv("cuMemAddressReserve", ctypes.byref(self.ptr), ctypes.c_size_t(self.size), ctypes.c_size_t(0),
                ctypes.c_ulonglong(0), ctypes.c_ulonglong(0))
            drv("cuMemMap", self.ptr, ctypes.c_size_t(self.size), ctypes.c_size_t(0), self.handle,
                ctypes.c_ulonglong(0))
            self._mapped = True
            access = _Access(_Location(_LOC_DEVICE, device), _PROT_RW)
            drv("cuMemSetAccess", self.ptr, ctypes.c_size_t(self.size), ctypes.byref(access), ctypes.c_size_t(1))
        except IpcError:
            self.free()
            raise
        self.tensor = torch.as_tensor(_CudaArray(int(self.ptr.value), self.size), device=f"cuda:{device}")

    def export_fd(self) -> int:
        fd = ctypes.c_int(-1)
        _drv()("cuMemExportToShareableHandle", ctypes.byref(fd), self.handle, _POSIX_FD, ctypes.c_ulonglong(0))
        return int(fd.value)

    def free(self) -> None:
        drv = _drv()
        self.tensor = None
        if self._mapped:
            drv.lib.cuMemUnmap(self.ptr, ctypes.c_size_t(self.size))
            self._mapped = False
        if self.ptr.value:
            drv.lib.cuMemAddressFree(self.ptr, ctypes.c_size_t(self.size))
            self.ptr = ctypes.c_ulonglong()
        if self.handle.value:
            drv.lib.cuMemRelease(self.handle)
            self.handle = ctypes.c_ulonglong()


def _layout(torch: Any, outs: list[Any]) -> tuple[list[dict[str, Any]], int]:
    layout, off = [], 0
    for o in outs:
        nbytes = o.numel() * o.element_size()
        layout.append({"shape": list(o.shape), "dtype": str(o.dtype).replace("torch.", ""), "offset": off,
                       "nbytes": nbytes})
        off += (nbytes + ALIGN - 1) // ALIGN * ALIGN
    return layout, off


def _ensure_context(device: int) -> None:
    """Make the device's primary context current on this thread (the driver API needs one)."""
    drv = _drv()
    ctx = ctypes.c_void_p()
    if drv.lib.cuCtxGetCurrent(ctypes.byref(ctx)) == 0 and ctx.value:
        return
    dev = ctypes.c_int()
    drv("cuDeviceGet", ctypes.byref(dev), device)
    drv("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
    drv("cuCtxSetCurrent", ctx)


def export_outputs(torch: Any, outs: list[Any], device: int) -> tuple[SharedBuffer, list[dict[str, Any]]]:
    """Kernel side: copy ``outs`` into a new shareable buffer (device to device); return it and its layout."""
    _ensure_context(device)
    layout, total = _layout(torch, outs)
    buf = SharedBuffer(torch, max(total, 1), device)
    for o, entry in zip(outs, layout, strict=True):
        if entry["nbytes"]:
            dst = buf.tensor[entry["offset"]:entry["offset"] + entry["nbytes"]]
            dst.copy_(o.detach().contiguous().reshape(-1).view(torch.uint8))
    torch.cuda.synchronize()
    return buf, layout


def _dtype(torch: Any, name: Any) -> Any:
    dt = getattr(torch, str(name), None) if isinstance(name, str) and name.isidentifier() else None
    if not isinstance(dt, torch.dtype):
        raise IpcError(f"unknown dtype {name!r}")
    return dt


def import_outputs(torch: Any, fd: int, layout: Any, device: int) -> list[Any]:
    """Reference side: map the kernel's buffer, check its layout, return private copies of the outputs."""
    if not isinstance(layout, list) or len(layout) > MAX_OUTPUTS:
        raise IpcError("invalid output layout")
    _ensure_context(device)
    size = max([int(e["offset"]) + int(e["nbytes"]) for e in layout] + [1])
    buf = SharedBuffer(torch, size, device, fd=fd)
    try:
        outs = []
        for e in layout:
            dt, shape, off, nbytes = _dtype(torch, e["dtype"]), [int(s) for s in e["shape"]], int(e["offset"]), int(e["nbytes"])
            numel = 1
            for s in shape:
                numel *= s
            itemsize = torch.empty((), dtype=dt).element_size()
            if off < 0 or nbytes != numel * itemsize or off + nbytes > buf.size or off % ALIGN:
                raise IpcError("output layout does not fit the shared buffer")
            raw = buf.tensor[off:off + nbytes].clone()
            outs.append(raw.view(dt).reshape(shape) if nbytes else torch.empty(shape, dtype=dt, device=raw.device))
        torch.cuda.synchronize()
        return outs
    finally:
        buf.free()


def send_fd(sock: socket.socket, fd: int) -> None:
    socket.send_fds(sock, [b"F"], [fd])


def recv_fd(sock: socket.socket) -> int:
    _msg, fds, _flags, _addr = socket.recv_fds(sock, 1, 4)
    if not fds:
        raise IpcError("no file descriptor received")
    for extra in fds[1:]:
        os.close(extra)
    return fds[0]
