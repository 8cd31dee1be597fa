"""The C compiler and linker an export uses: the system's ``cc``, else ``zig cc``.

``find_compiler()`` returns the command that compiles and links C: ``cc`` on the
``PATH`` (gcc or clang), else the ``zig`` the optional ``ziglang`` wheel ships
(``pip install 'tensorcode[aot]'``), run as ``zig cc``; with neither it
raises ``CompileError`` naming both. ``link`` builds the library reproducibly: every
file is named relative to the build directory, no build id, no symbol table beyond the
exported interface (a version script keeps only ``<name>_*``), so the same input gives
the same bytes.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

from ..errors import CompileError
from ..extras import installed

#: the environment variable naming another C compiler (a path or a command name)
CC_ENV = "TENSORCODE_CC"
#: how long one compile or link may take
TIMEOUT_S = 300


def find_compiler() -> list[str]:
    """The command that compiles and links C here (see the module docstring)."""
    chosen = os.environ.get(CC_ENV)
    if chosen:
        found = shutil.which(chosen)
        if found is None:
            raise CompileError(f"{CC_ENV}={chosen!r} names no program on the PATH")
        return [found]
    found = shutil.which("cc")
    if found is not None:
        return [found]
    ziglang = installed("ziglang")
    if ziglang is not None and ziglang.__file__ is not None:
        zig = pathlib.Path(ziglang.__file__).parent / "zig"
        if zig.is_file():
            return [str(zig), "cc"]
    raise CompileError("exporting a library needs a C compiler and linker: install the "
                       "system's cc (gcc or clang, e.g. apt install gcc), or the zig "
                       "toolchain with pip install 'tensorcode[aot]' (the ziglang wheel, "
                       "run as zig cc)")


def _run(command: list[str], directory: pathlib.Path) -> None:
    try:
        done = subprocess.run(command, cwd=directory, capture_output=True, text=True,
                              timeout=TIMEOUT_S, env={**os.environ, "LC_ALL": "C"})
    except (OSError, subprocess.TimeoutExpired) as error:
        raise CompileError(f"{command[0]} failed to run: {error}") from None
    if done.returncode:
        raise CompileError(f"{' '.join(command)} failed (status {done.returncode}):\n"
                           f"{(done.stderr or done.stdout)[-4000:]}")


def link(directory: pathlib.Path, name: str, plan_object: str, source: str,
         blas: str | None) -> str:
    """Compile ``source`` (a file in ``directory``) and link it with ``plan_object``
    into ``lib<name>.so`` there; ``blas`` is the BLAS library the plan calls (linked by
    its path, found at run time through the library's run path). Returns the compiler
    command's first word, for the manifest."""
    cc = find_compiler()
    wrapper = "wrapper.o"
    _run(cc + ["-std=c11", "-O2", "-fPIC", "-fno-ident",
               "-ffile-prefix-map=" + str(directory) + "=.", "-c", source, "-o", wrapper],
         directory)
    (directory / "exports.map").write_text(f"{{ global: {name}_*; local: *; }};\n")
    command = cc + ["-shared", "-o", f"lib{name}.so", wrapper, plan_object,
                    "-Wl,--build-id=none", "-Wl,--version-script=exports.map",
                    f"-Wl,-soname,lib{name}.so", "-Wl,--hash-style=gnu", "-s"]
    if blas is not None:
        path = pathlib.Path(blas)
        command += [f"-L{path.parent}", f"-l:{path.name}", f"-Wl,-rpath,{path.parent}"]
    _run(command + ["-lm"], directory)
    return "zig cc" if len(cc) > 1 else pathlib.Path(cc[0]).name


__all__ = ["CC_ENV", "find_compiler", "link"]
