"""Reading a KernelBench run folder, a zip of one, or the same as JSON, into a Bundle: the kernel
files and the parsed eval_results.json, every entry checked, nothing yet compared with the
database (leaderboard/ingest/run_import.py does that and writes).

A run folder holds one file per generated kernel, `level_<L>_problem_<P>_sample_<S>_kernel.py`, and
optionally `eval_results.json`. Unsafe names, links, encrypted entries, too many entries, and
anything that inflates past the caps are refused; every problem is reported at once (RowErrors).

A zip's work is bounded by its own size (246 KB of zip inflated to 200 MB of kernels, all stored,
within every other cap): the members together may inflate to at most RUN_MAX_ARCHIVE_RATIO times
the archive's bytes (and never past RUN_UNCOMPRESSED_MAX_BYTES), checked from the central directory
before any member is read and again, on the bytes actually read, while reading; and every member,
however small, must compress by no more than RUN_MAX_COMPRESSION_RATIO.
"""

from __future__ import annotations

import os
import re
import stat
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NamedTuple

from django.conf import settings

from leaderboard.ingest import generation_config
from leaderboard.ingest.generation_config import CONFIG_NAME
from leaderboard.ingest.uploads import RowErrors, decode_upload, strict_json
from leaderboard.models import Kernel
from problems.importing import checked_int, whole_number
from problems.models import Problem

KERNEL_NAME = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$", re.ASCII)
RESULTS_NAME = "eval_results.json"
# Reading a member can fail in many ways on a damaged or hostile archive; each is that member's error.
MEMBER_READ_ERRORS = (zipfile.BadZipFile, NotImplementedError, RuntimeError, OSError, EOFError, zlib.error, ValueError)


class InflatedBudget(NamedTuple):
    bytes: int
    limit: str  # the limit in words, for the error


@dataclass(frozen=True)
class Limits:
    """Caps on what one upload may hold (settings RUN_*_MAX_* and KERNEL_SOURCE_MAX_BYTES)."""

    kernel_bytes: int
    results_bytes: int
    total_bytes: int
    entries: int
    ratio: int  # one member's inflated size to its compressed size
    archive_ratio: int  # all members' inflated sizes to the archive's size

    @classmethod
    def from_settings(cls) -> Limits:
        return cls(
            kernel_bytes=settings.KERNEL_SOURCE_MAX_BYTES,
            results_bytes=settings.RUN_RESULTS_MAX_BYTES,
            total_bytes=settings.RUN_UNCOMPRESSED_MAX_BYTES,
            entries=settings.RUN_MAX_ENTRIES,
            ratio=settings.RUN_MAX_COMPRESSION_RATIO,
            archive_ratio=settings.RUN_MAX_ARCHIVE_RATIO,
        )

    def inflated_budget(self, archive_bytes: int) -> InflatedBudget:
        """How many bytes an archive of `archive_bytes` may inflate to, all members together."""
        by_ratio = self.archive_ratio * archive_bytes
        if by_ratio < self.total_bytes:
            return InflatedBudget(by_ratio, f"{self.archive_ratio} times the archive's {archive_bytes} bytes")
        return InflatedBudget(self.total_bytes, f"{self.total_bytes} bytes")

    def cap(self, base: str) -> int:
        """The size cap of one member, by its file name."""
        return self.results_bytes if base == RESULTS_NAME else self.kernel_bytes


@dataclass(frozen=True)
class KernelFile:
    name: str
    level: int
    problem: int
    sample: int
    source: str
    # A kernel whose source is withheld (source ""): the public file's hash and URL (Kernel.source_url).
    source_hash: str = ""
    source_url: str = ""


@dataclass
class Bundle:
    """What an upload holds, before it is checked against the database."""

    kernels: list[KernelFile]
    results: Any = None  # the parsed eval_results.json, if any
    ignored: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)  # import defaults from generation_config.yaml


def _check_source(name: str, source: str, limits: Limits) -> None:
    size = len(source.encode("utf-8", errors="surrogatepass"))
    if size > limits.kernel_bytes:
        raise RowErrors([f"{name}: {size} bytes; the limit for one kernel is {limits.kernel_bytes} bytes"])
    if "\x00" in source:
        raise RowErrors([f"{name}: contains a NUL character"])
    try:
        source.encode("utf-8")
    except UnicodeEncodeError:
        raise RowErrors([f"{name}: is not valid Unicode text"]) from None


def load_json(name: str, text: str) -> Any:
    """strict_json, with RowErrors naming `name`."""
    try:
        return strict_json(text)
    except ValueError as exc:
        raise RowErrors([f"{name}: not valid JSON ({exc})"]) from None


def kernel_numbers(name: str, match: re.Match) -> tuple[int, int, int]:
    """(level, problem number, sample) of a kernel file name, each within its column's range;
    ValueError naming the file and the part at fault. (A level that is no level of the set is
    reported when the kernel is matched with its problem.)"""
    level, problem, sample = match.groups()
    checks = (
        ("level", lambda: whole_number(level)),
        ("problem", lambda: checked_int(problem, Problem, "number")),
        ("sample", lambda: checked_int(sample, Kernel, "sample_index")),
    )
    numbers = []
    for part, check in checks:
        try:
            numbers.append(check())
        except ValueError as exc:
            raise ValueError(f"{name[:120]}: {part} {exc}") from None
    return numbers[0], numbers[1], numbers[2]


def from_files(files: dict[str, str], results: Any = None, limits: Limits | None = None) -> Bundle:
    """A bundle from kernel file names and sources (the JSON form of a run)."""
    limits = limits or Limits.from_settings()
    if len(files) > limits.entries:
        raise RowErrors([f"{len(files)} kernels; the limit is {limits.entries}"])
    kernels: list[KernelFile] = []
    errors: list[str] = []
    for name, source in files.items():
        match = KERNEL_NAME.match(name)
        if not match:
            errors.append(f"{name[:120]!r}: not a kernel file name (level_<L>_problem_<P>_sample_<S>_kernel.py)")
            continue
        if not isinstance(source, str):
            errors.append(f"{name}: the source must be text")
            continue
        try:
            _check_source(name, source, limits)
            level, problem, sample = kernel_numbers(name, match)
        except RowErrors as exc:
            errors += exc.errors
            continue
        except ValueError as exc:
            errors.append(str(exc))
            continue
        kernels.append(KernelFile(name, level, problem, sample, source))
    if errors:
        raise RowErrors(errors)
    return Bundle(kernels, results)


def _unsafe_path(name: str) -> str | None:
    normalized = name.replace("\\", "/")
    if "\x00" in name:
        return "contains a NUL character"
    if normalized.startswith("/") or re.match(r"^[A-Za-z]:", normalized):
        return "is an absolute path"
    if ".." in normalized.split("/"):
        return "climbs out of the archive (..)"
    return None


def _base(name: str) -> str:
    return name.replace("\\", "/").rsplit("/", 1)[-1]


def read_zip(fileobj: IO[bytes], limits: Limits | None = None) -> Bundle:
    """A bundle from a zip of a run folder, in three phases:

    1. _open_zip: the archive's directory, refused when it has too many entries or claims too much;
    2. _select_members: which entries to read (kernel files and eval_results.json), every unsafe
       one refused (names, links, encryption, ratios) and every other one ignored;
    3. _read_members: each selected entry, read up to its cap whatever the archive claims.
    """
    limits = limits or Limits.from_settings()
    archive, infos, budget = _open_zip(fileobj, limits)
    wanted, ignored = _select_members(infos, limits)
    files, errors = _read_members(archive, wanted, limits, budget)
    return _bundle(files, ignored, errors, limits)


def _open_zip(fileobj: IO[bytes], limits: Limits) -> tuple[zipfile.ZipFile, list[zipfile.ZipInfo], InflatedBudget]:
    """The archive, its entries, and its inflated budget (bytes, and the limit in words)."""
    try:
        archive_bytes = fileobj.seek(0, os.SEEK_END)
        fileobj.seek(0)
        archive = zipfile.ZipFile(fileobj)
        infos = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError):
        raise RowErrors(["the file is not a readable zip archive"]) from None
    if len(infos) > limits.entries:
        raise RowErrors([f"the archive has {len(infos)} entries; the limit is {limits.entries}"])
    budget = limits.inflated_budget(archive_bytes)
    declared = sum(info.file_size for info in infos)
    if declared > budget.bytes:
        raise RowErrors([f"the archive inflates to {declared} bytes; the limit is {budget.limit}"])
    return archive, infos, budget


def _refusal(info: zipfile.ZipInfo, limits: Limits) -> str | None:
    """Why an entry may not be read at all, or None."""
    unsafe = _unsafe_path(info.filename)
    if unsafe:
        return f"{info.filename!r}: {unsafe}"
    if stat.S_ISLNK(info.external_attr >> 16):
        return f"{info.filename}: is a symbolic link"
    if info.flag_bits & 0x1:
        return f"{info.filename}: is encrypted"
    # Every member, however small: a zip bomb of 999 KB members passes a check with a 1 MB floor.
    if info.file_size > limits.ratio * max(info.compress_size, 1):
        return f"{info.filename}: compression ratio above {limits.ratio}:1, the limit (a zip bomb?)"
    return None


def _select_members(infos: list[zipfile.ZipInfo], limits: Limits) -> tuple[list[zipfile.ZipInfo], list[str]]:
    """The entries to read and the names ignored; RowErrors lists every refused entry."""
    errors: list[str] = []
    wanted: list[zipfile.ZipInfo] = []
    ignored: list[str] = []
    seen: dict[str, str] = {}
    for info in infos:
        refusal = None if (info.is_dir() and not _unsafe_path(info.filename)) else _refusal(info, limits)
        if refusal:
            errors.append(refusal)
            continue
        base = _base(info.filename)
        if info.is_dir() or base.startswith("._") or "__MACOSX/" in info.filename:
            continue  # folders, macOS resource forks
        if not (KERNEL_NAME.match(base) or base in (RESULTS_NAME, CONFIG_NAME)):
            ignored.append(info.filename)
        elif base in seen:
            errors.append(f"{info.filename}: a second file named {base} (first: {seen[base]})")
        else:
            seen[base] = info.filename
            wanted.append(info)
    if errors:
        raise RowErrors(errors)
    return wanted, ignored


def _read_members(
    archive: zipfile.ZipFile, wanted: list[zipfile.ZipInfo], limits: Limits, budget: InflatedBudget
) -> tuple[dict[str, str], list[str]]:
    """The text of every wanted entry by base name (kernels, eval_results.json,
    generation_config.yaml), with the errors of those that could not be read. The bytes read count
    against the inflated budget whatever the directory declared."""
    files: dict[str, str] = {}
    errors: list[str] = []
    total = 0
    for info in wanted:
        base = _base(info.filename)
        cap = limits.cap(base)
        try:
            with archive.open(info) as member:
                data = member.read(cap + 1)
        except MEMBER_READ_ERRORS as exc:
            errors.append(f"{info.filename}: cannot be read ({exc})")
            continue
        if len(data) > cap:
            errors.append(f"{info.filename}: larger than {cap} bytes")
            continue
        total += len(data)
        if total > budget.bytes:
            raise RowErrors([f"the archive inflates past {budget.bytes} bytes; the limit is {budget.limit}"])
        _decode_into(files, base, data, info.filename, errors)
    return files, errors


def _decode_into(files: dict[str, str], base: str, data: bytes, name: str, errors: list[str]) -> None:
    """files[base] = the decoded text, or the reason it cannot be decoded added to errors."""
    try:
        files[base] = decode_upload(data, name)
    except RowErrors as exc:
        errors += exc.errors


def _bundle(files: dict[str, str], ignored: list[str], errors: list[str], limits: Limits) -> Bundle:
    """The bundle read from an archive or a folder, once every entry has been checked."""
    if errors:
        raise RowErrors(errors)
    results_text = files.pop(RESULTS_NAME, None)
    results = load_json(RESULTS_NAME, results_text) if results_text is not None else None
    config_text = files.pop(CONFIG_NAME, None)
    bundle = from_files(files, results, limits)
    bundle.ignored = ignored
    bundle.config = generation_config.parse(config_text) if config_text is not None else {}
    return bundle


def read_folder(path: Path, limits: Limits | None = None) -> Bundle:
    """A bundle from a run folder on disk (links are not followed)."""
    limits = limits or Limits.from_settings()
    if not path.is_dir():
        raise RowErrors([f"{path}: not a folder"])
    files: dict[str, str] = {}
    ignored: list[str] = []
    errors: list[str] = []
    count = 0
    for root, _dirs, names in os.walk(path, followlinks=False):
        for base in sorted(names):
            count += 1
            if count > limits.entries:
                raise RowErrors([f"{path}: more than {limits.entries} files"])
            file = Path(root) / base
            if not (KERNEL_NAME.match(base) or base in (RESULTS_NAME, CONFIG_NAME)) or file.is_symlink():
                ignored.append(str(file.relative_to(path)))
                continue
            if file.stat().st_size > limits.cap(base):
                errors.append(f"{file}: larger than {limits.cap(base)} bytes")
                continue
            if base in files:
                errors.append(f"{file}: a second file named {base}")
                continue
            _decode_into(files, base, file.read_bytes(), str(file), errors)
    return _bundle(files, ignored, errors, limits)


def read_json_upload(data: bytes) -> tuple[dict, Bundle]:
    """A JSON file shaped like the API's JSON body: {"kernels": {...}, "eval_results": {...}, ...}.
    Returns the other fields (model, hardware, ...) and the bundle."""
    document = load_json("the JSON file", decode_upload(data, "the JSON file"))
    if not isinstance(document, dict) or not isinstance(document.get("kernels"), dict):
        raise RowErrors(['the JSON file must be an object with "kernels": {file name: source}'])
    kernels = document.pop("kernels")
    results = document.pop("eval_results", None)
    return document, from_files(kernels, results)
