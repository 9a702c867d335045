"""One evaluation's sandbox: its folder, the confinement of each process it starts (namespaces,
mounts, uids, rlimits, a scrubbed environment: evaluation.sandbox.isolation), the files the
processes hand each other, and its end."""

from __future__ import annotations

import io
import json
import os
import secrets
import sys
import tempfile
from typing import Any

from evaluation.paths import PACKAGE_DIR
from evaluation.sandbox.isolation import (
    PRIVATE_DIRECTORIES,
    TMPFS_FOLDER,
    compute_masks,
    detect_isolation,
    hidden_directories,
    needed_paths,
    nproc_counts_sandbox_only,
    work_root,
    world_writable_directories,
)
from evaluation.sandbox.limits import (
    DEFAULT_MAX_PROCESSES,
    NPROC_HEADROOM,
    TMP_MAX_INODES,
    Watchdog,
    default_tmp_limit_mb,
)
from evaluation.sandbox.orphans import sandbox_prefix
from evaluation.sandbox.process import EXIT_WAIT_S, ChildError, SandboxProcess
from evaluation.sandbox.safe_files import UnsafeFile, read_capped, remove_tree, take_over

PASS_THROUGH_ENV = (
    "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "TORCH_CUDA_ARCH_LIST", "MAX_JOBS",
    "OMP_NUM_THREADS", "KB_TORCH_THREADS", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
    "NVSHMEM_DISABLE_NVLS", "CC", "CXX", "TRITON_PTXAS_PATH", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
)

#: A command (a compiler: evaluation.builds.units) confined like the sandbox's processes, then exec'ed.
COMMAND_BOOT = ("import sys, json, os; sys.path.insert(0, {pylib!r}); from evaluation.child.confine import confine; "
                "spec = json.loads(sys.argv[1]); confine(spec); os.execvp(spec['argv'][0], spec['argv'])")


def sandbox_path() -> str:
    """The PATH of a sandbox's processes: the interpreter's folder, the CUDA toolkit's bin and the
    system's folders (what torch searches for nvcc in a kernel's or a build's process)."""
    path = [os.path.dirname(sys.executable)]
    for cand in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if cand and os.path.isdir(os.path.join(cand, "bin")):
            path.append(os.path.join(cand, "bin"))
    path += ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
    return ":".join(dict.fromkeys(path))


class Sandbox:
    """A per-evaluation temporary tree plus the child processes started in it."""

    def __init__(self, *, device: str, size_scale: int, memory_limit_mb: int, hide_paths: tuple[str, ...] = (),
                 isolation: str = "auto", build_dir: str | None = None, disable: frozenset[str] = frozenset(),
                 cpu_threads: int | None = None, max_processes: int = DEFAULT_MAX_PROCESSES,
                 file_size_limit_mb: int | None = None, extra_env: dict[str, str] | None = None,
                 expose: tuple[str, ...] = (), tmp_limit_mb: int | None = None) -> None:
        self.device = device
        self.size_scale = size_scale
        self.memory_limit_mb = memory_limit_mb
        self.max_processes = max_processes
        self.file_size_limit_mb = file_size_limit_mb or memory_limit_mb
        self.tmp_limit_mb = tmp_limit_mb or default_tmp_limit_mb(memory_limit_mb)
        self.disable = disable
        self.cpu_threads = cpu_threads
        # Set last in every child's environment (the build stage hides the GPUs and names the target
        # architecture; the GPU phase names the same architecture, so that the build is up to date).
        self.extra_env = dict(extra_env or {})
        self.iso = detect_isolation() if isolation == "auto" else {"mode": "none", "reason": "isolation='none'"}
        self.mode = self.iso["mode"]
        self.root = tempfile.mkdtemp(prefix=sandbox_prefix(os.getpgrp()), dir=work_root())
        os.chmod(self.root, 0o711)
        self.pylib = os.path.join(self.root, "pylib")
        os.mkdir(self.pylib)
        os.symlink(PACKAGE_DIR, os.path.join(self.pylib, "evaluation"))
        os.chmod(self.pylib, 0o755)
        self.src = os.path.join(self.root, "src")
        os.mkdir(self.src)
        os.chmod(self.src, 0o755)
        self.build_dir = build_dir
        # The cache root too: the entry itself may appear only later (built by the build stage).
        extra = [self.root, *expose] + ([build_dir, os.path.dirname(build_dir)] if build_dir else [])
        for var in ("CUDA_HOME", "CUDA_PATH"):
            if os.environ.get(var):
                extra.append(os.environ[var])
        if os.path.isdir("/usr/local/cuda"):
            extra.append("/usr/local/cuda")
        self.needed = needed_paths(extra)
        self.hidden = hidden_directories(hide_paths) + world_writable_directories()
        self.masks: list[list[Any]] = []  # those of the last process started (the kernel's, in an evaluation)
        self.switch_uid = self.mode == "root" and os.environ.get("KB_SANDBOX_SWITCH_UID", "1") != "0"
        self.nproc_limited = nproc_counts_sandbox_only(self.mode, self.switch_uid)
        base = int(os.environ.get("KB_SANDBOX_UID_BASE", 0)) or (200000 + 2 * secrets.randbelow(400000))
        # "unit": the unit server's compiler (evaluation.builds.units), in a sandbox of its own, no kernel's uid.
        self.uids = {"reference": base, "kernel": base + 1, "build": base + 1, "unit": base}
        self.procs: list[SandboxProcess] = []
        self.watchdog = Watchdog()
        self.watchdog.start()

    def write_source(self, name: str, text: str) -> str:
        path = os.path.join(self.src, name)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(path, 0o644)
        return path

    def _env(self, workdir: str, role: str) -> dict[str, str]:
        env = {
            "PATH": sandbox_path(),
            # torch would put ccache or sccache, where one is on PATH, into build.ninja's commands: a
            # host that gains one would have its cached entries rewritten (evaluation.builds.entry.key_paths).
            "TORCH_NO_COMPILER_WRAPPER": "1",
            "HOME": workdir,
            # Also where /tmp is (its own) in isolated modes; in mode 'none' the only private temp folder.
            "TMPDIR": os.path.join(workdir, TMPFS_FOLDER, "tmp"),
            "TMP": os.path.join(workdir, TMPFS_FOLDER, "tmp"),
            "TEMP": os.path.join(workdir, TMPFS_FOLDER, "tmp"),
            "LANG": "C.UTF-8",
            "KB_SCALE": str(self.size_scale),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
            # No network in the sandbox: Hugging Face libraries must fail at once, not retry.
            "HF_HUB_OFFLINE": "1",
            "USER": "kb-sandbox",  # the sandbox's uid has no passwd entry; getpass.getuser() reads this
            "LOGNAME": "kb-sandbox",
            "TRANSFORMERS_OFFLINE": "1",
        }
        for var in PASS_THROUGH_ENV:
            if var in os.environ:
                env[var] = os.environ[var]
        if self.cpu_threads:
            env["KB_TORCH_THREADS"] = str(self.cpu_threads)
            env["OMP_NUM_THREADS"] = str(self.cpu_threads)
        if "env_scrub" in self.disable:  # test-only switch: show what an unscrubbed environment leaks
            env = {**os.environ, **env}
        if role in ("kernel", "build") and self.build_dir:
            env["TORCH_EXTENSIONS_DIR"] = os.path.join(self.build_dir, "torch_extensions")
            env["TRITON_CACHE_DIR"] = os.path.join(self.build_dir, "triton")
        env.update(self.extra_env)
        return env

    def _confinement(self, role: str) -> tuple[str, dict[str, Any], list[str]]:
        """A role's work folder (made, its uid's), its confinement spec and the command prefix."""
        workdir = os.path.join(self.root, role)
        uid = self.uids["reference" if role.startswith("reference") else role] if self.switch_uid else None
        tmpfs = os.path.join(workdir, TMPFS_FOLDER)
        private = {target: os.path.join(tmpfs, name) for target, name in PRIVATE_DIRECTORIES.items()}
        for d in (workdir, tmpfs, *private.values()):
            os.mkdir(d, 0o700)
            if uid is not None:
                os.chown(d, uid, uid)
        masks = []
        if self.mode in ("root", "userns"):
            # First: the tmpfs over <workdir>/tmpfs, then its folders bind-mounted over /tmp and the others.
            options = f"size={self.tmp_limit_mb}m,nr_inodes={TMP_MAX_INODES},mode=0711"
            masks = [[tmpfs, [], {"options": options, "folders": list(PRIVATE_DIRECTORIES.values()), "uid": uid}],
                     *compute_masks(self.needed, tuple(self.hidden), {**private, **self._accounts(role, uid, workdir)})]
        self.masks = masks
        spec = {"role": role, "workdir": workdir, "uid": uid, "gid": uid, "masks": masks, "rlimits": self._rlimits()}
        prefix = list(self.iso.get("prefix", [])) if self.mode != "none" else []
        if prefix:
            prefix.append("--")
        return workdir, spec, prefix

    def command(self, role: str, argv: list[str]) -> tuple[list[str], dict[str, str], str]:
        """``argv`` (a compiler) confined like the sandbox's processes (namespaces, mounts, rlimits,
        the role's uid, no_new_privs), as (the command to start, its environment, its work folder)."""
        workdir, spec, prefix = self._confinement(role)
        spec["argv"] = list(argv)
        boot = [sys.executable, "-I", "-c", COMMAND_BOOT.format(pylib=self.pylib), json.dumps(spec)]
        return [*prefix, *boot], self._env(workdir, role), workdir

    def spawn(self, role: str, problem_path: str, kernel_path: str | None = None) -> SandboxProcess:
        workdir, spec, prefix = self._confinement(role)
        spec.update(device=self.device, problem_path=problem_path, kernel_path=kernel_path,
                    disable=sorted(self.disable))
        p = SandboxProcess(role, spec, self._env(workdir, role), prefix, os.path.join(self.root, f"{role}.log"),
                           self.memory_limit_mb, self.max_processes)
        p.start(self.pylib)
        self.procs.append(p)
        self.watchdog.add(p)
        return p

    def _accounts(self, role: str, uid: int | None, workdir: str) -> dict[str, str]:
        """/etc/passwd and /etc/group as the process sees them: root and its own uid, not the host's
        users (bind-mounted over the real ones; root-owned, so the process cannot change them)."""
        folder = os.path.join(self.root, f"accounts-{role}")
        os.mkdir(folder, 0o755)
        passwd, group = "root:x:0:0:root:/root:/usr/sbin/nologin\n", "root:x:0:\n"
        if uid is not None:
            passwd += f"kb-sandbox:x:{uid}:{uid}:KernelBench sandbox:{workdir}:/usr/sbin/nologin\n"
            group += f"kb-sandbox:x:{uid}:\n"
        files = {}
        for target, text in (("/etc/passwd", passwd), ("/etc/group", group)):
            path = os.path.join(folder, os.path.basename(target))
            with open(path, "w", encoding="ascii") as fh:
                fh.write(text)
            os.chmod(path, 0o644)
            files[target] = path
        return files

    def _rlimits(self) -> dict[str, int]:
        rlimits: dict[str, int] = {"RLIMIT_CORE": 0, "RLIMIT_FSIZE": self.file_size_limit_mb * 2**20}
        if self.device == "cpu":
            # Address-space cap as a backstop behind the memory watchdog (it breaks CUDA, so CPU only).
            rlimits["RLIMIT_AS"] = (self.memory_limit_mb + 6144) * 2**20
        if self.nproc_limited:
            rlimits["RLIMIT_NPROC"] = self.max_processes + NPROC_HEADROOM
        return rlimits

    def hand_over(self, src: SandboxProcess, dst: SandboxProcess, name: str, new_name: str) -> str:
        """Move an output file from one child's directory into another's and give it to the receiving
        child's uid (``safe_files.take_over``: by descriptor, refusing links, non-regular files, files
        of another uid and a file swapped while it moves). Returns the new file name."""
        if not name or "/" in name or name.startswith("."):
            raise ChildError("crashed", f"the {src.role} process named an invalid output file")
        try:
            take_over(src.spec["workdir"], name, dst.spec["workdir"], new_name, dst.spec.get("uid"),
                      src.spec.get("uid"))
        except UnsafeFile as exc:
            raise ChildError("crashed", f"the {src.role} process left an invalid output file: {exc}") from exc
        return new_name

    def read_output(self, proc: SandboxProcess, name: str, max_bytes: int = 16 * 2**30) -> Any:
        """Load an output file written by a child, refusing links and non-regular files."""
        import torch  # deferred: torch is heavy; only check_problem reads outputs in the parent

        if "/" in name or name.startswith("."):
            raise ChildError("crashed", f"the {proc.role} process named an invalid output file")
        path = os.path.join(proc.spec["workdir"], name)
        try:
            data = read_capped(path, max_bytes)
        except UnsafeFile as exc:
            raise ChildError("crashed", f"the {proc.role} process left an invalid output file: {exc}") from exc
        os.unlink(path)
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)

    def environment(self) -> dict[str, Any]:
        first = next((p for p in self.procs if p.role == "kernel"), None)
        isolated = self.mode in ("root", "userns")
        return {
            "isolation_mode": self.mode,
            "network_isolated": isolated,
            "pid_namespace": isolated,
            "private_tmp": isolated,  # /tmp, /var/tmp, /dev/shm: the process's own, removed afterwards
            "uid": self.uids["kernel"] if self.switch_uid else os.getuid(),
            "reference_uid": self.uids["reference"] if self.switch_uid else os.getuid(),
            "hidden_paths": [m[0] for m in self.masks if m[2] is None],
            "memory_limit": ("rlimit_as+pss_watchdog" if self.device == "cpu" else "pss_watchdog"),
            "memory_limit_mb": self.memory_limit_mb,
            "process_limit": "rlimit_nproc+watchdog" if self.nproc_limited else "watchdog",
            "max_processes": self.max_processes,
            "file_size_limit_mb": self.file_size_limit_mb,
            "tmp_limit_mb": self.tmp_limit_mb if isolated else None,
            "kernel_peak_rss_mb": round(first.peak_rss_mb, 1) if first else None,
            "kernel_peak_tasks": first.peak_tasks if first else None,
        }

    def close(self) -> None:
        self.watchdog.stop()
        for p in self.procs:
            try:
                p.close(graceful=False)
            except Exception:  # noqa: BLE001
                pass
            if p.unexited:  # the next evaluation on this GPU may find its memory still taken
                sys.stderr.write(f"sandbox: the {p.role} process's PIDs {p.unexited} still ran {EXIT_WAIT_S:g} s "
                                 "after they were killed\n")
        remove_tree(self.root)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
