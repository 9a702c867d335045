"""The unit client: what ``evaluation/builds/unit_cc`` (the ``CXX`` of a build) runs, inside the kernel's build.

For a compile of one C++ unit, as ninja runs it for ``load_inline``
(``cxx -MMD -MF main.o.d <flags> -c main.cpp -o main.o``), it sends the unit's text and its flags
to the build's unit server (``$KB_UNIT_SOCKET``, evaluation/builds/units.py) and writes the object and the
dependency file the server answers with. Anything else, and anything the server cannot compile the
same way (no server, a quoted include of a file beside the source, an include through a macro, a
flag it does not know, a failed or late compile), is compiled here exactly as without the server:
the real compiler (``$KB_UNIT_CXX``) with the very same arguments.

Standard library only (it runs under ``python -I`` in the sandbox); nothing it does is trusted: the
server compiles the text it is sent in a sandbox of its own and never reads the kernel's folder.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import struct
import sys

#: Flags followed by their value as the next argument (other such flags: compiled here).
VALUE_FLAGS = ("-isystem", "-I", "-D", "-U")
ARG_FLAGS = ("-include", "-imacros", "-iquote", "-idirafter", "-iprefix", "-MT", "-MQ", "-x", "-Xpreprocessor",
             "-Xassembler", "-Xlinker", "--param", "-L", "-l", "-B", "-specs", "-aux-info", "-iwithprefix")
SOURCE_SUFFIXES = (".cpp", ".cc", ".cxx")
QUOTED_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include(?:_next)?[ \t]*"([^"\n]*)"', re.M)
#: An include through a macro, a test for a file's presence, a file pulled in by the assembler.
UNRESOLVABLE = re.compile(rb'^[ \t]*#[ \t]*include(?:_next)?[ \t]*[^"<\s]|__has_include|\.incbin|#[ \t]*embed', re.M)
#: What the server refuses whoever sent it (the client is the kernel's: it may skip its own checks):
#: the above, an absolute or climbing include in either spelling, and any assembler text (``asm``:
#: ``".inc" "bin"`` is ``.incbin`` once the strings are joined; a wrapper has none).
SERVER_REFUSED = re.compile(
    rb'^[ \t]*#[ \t]*include(?:_next)?[ \t]*(?:[^"<\s]|["<][ \t]*/|["<][^">\n]*\.\.)|__has_include|incbin|'
    rb'#[ \t]*embed|__has_embed|\b_*asm_*\b', re.M)
#: A wrapper (``main.cpp``: the declarations and bindings) is a few kB; a CPU kernel's whole C++ code
#: some tens. A larger unit is compiled in the build, and a request is never larger than this.
MAX_SOURCE_BYTES = 2**20
MAX_REQUEST_BYTES = 2 * MAX_SOURCE_BYTES


def parse(argv: list[str]) -> dict[str, object] | None:
    """The unit, its flags, output and dependency file of a one-unit compile; None for anything else."""
    flags: list[str] = []
    src = out = dep = None
    compile_only = mmd = False
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "-c":
            compile_only = True
        elif a == "-MMD":
            mmd = True
        elif a in ("-MF", "-o") or a in VALUE_FLAGS:
            if i + 1 >= len(argv):
                return None
            if a == "-MF":
                dep = argv[i + 1]
            elif a == "-o":
                out = argv[i + 1]
            else:
                flags += [a, argv[i + 1]]
            i += 1
        elif a in ARG_FLAGS or a.startswith("@"):
            return None
        elif a.startswith("-"):
            flags.append(a)
        elif src is None:
            src = a
        else:
            return None  # two sources
        i += 1
    if not (compile_only and mmd and src and out and dep and src.endswith(SOURCE_SUFFIXES)):
        return None
    return {"flags": flags, "source": src, "out": out, "dep": dep}


def local_only(text: bytes, folder: str) -> bool:
    """Whether the unit may read what the server cannot see: a quoted include found beside the source
    (or an absolute one), an include it cannot resolve by reading the text."""
    if UNRESOLVABLE.search(text):
        return True
    for m in QUOTED_INCLUDE.finditer(text):
        name = m.group(1).decode("utf-8", "replace")
        if os.path.isabs(name) or os.path.exists(os.path.join(folder, name)):
            return True
    return False


def server_refuses(text: bytes) -> bool:
    """Whether the server compiles this text nowhere: what it would read is not certain from the text."""
    return len(text) > MAX_SOURCE_BYTES or SERVER_REFUSED.search(text) is not None


def recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(min(1 << 20, n - got))
        if not chunk:
            raise OSError("the unit server closed the connection")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def ask(path: str, request: dict[str, object], timeout_s: float) -> tuple[dict[str, object], bytes]:
    """One request to the server: a length-prefixed JSON object; the answer the same, then its bytes."""
    body = json.dumps(request).encode()
    if len(body) > MAX_REQUEST_BYTES:
        raise ValueError("the unit is too large for the server")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        sock.connect(path)
        sock.sendall(struct.pack(">I", len(body)) + body)
        (n,) = struct.unpack(">I", recv_exact(sock, 4))
        head = json.loads(recv_exact(sock, n))
        data = recv_exact(sock, int(head.get("size", 0))) if head.get("ok") else b""
    return head, data


def _escape(path: str) -> str:
    return path.replace("\\", "\\\\").replace(" ", "\\ ").replace("#", "\\#").replace("$", "$$")


def _write(path: str, data: bytes) -> None:
    tmp = f"{path}.kb-unit.{os.getpid()}"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def served(argv: list[str]) -> bool:
    """Ask the server for the unit ``argv`` compiles and write what it answers; False: compile here."""
    sock_path = os.environ.get("KB_UNIT_SOCKET", "")
    unit = parse(argv) if sock_path else None
    if unit is None:
        return False
    src = str(unit["source"])
    try:
        with open(src, "rb") as fh:
            text = fh.read(MAX_SOURCE_BYTES + 1)
        if server_refuses(text) or local_only(text, os.path.dirname(os.path.abspath(src))):
            return False
        request = {"flags": unit["flags"], "name": os.path.basename(src), "text": text.decode("utf-8")}
        head, obj = ask(sock_path, request, float(os.environ.get("KB_UNIT_TIMEOUT_S", "3600")))
        if not head.get("ok"):
            return False
        listed = head.get("deps")
        deps = [src, *(d for d in (listed if isinstance(listed, list) else []) if isinstance(d, str))]
        _write(str(unit["out"]), obj)
        _write(str(unit["dep"]), f"{_escape(str(unit['out']))}: {' '.join(map(_escape, deps))}\n".encode())
    except (OSError, ValueError, UnicodeDecodeError, struct.error):
        return False
    return True


def main() -> None:
    argv = sys.argv[1:]
    if served(argv):
        sys.exit(0)
    real = shlex.split(os.environ.get("KB_UNIT_CXX") or "c++") or ["c++"]
    if os.path.basename(real[0]) == "unit_cc":
        real = ["c++"]
    os.execvp(real[0], [*real, *argv])


if __name__ == "__main__":
    main()
