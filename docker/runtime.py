"""Assemble the root filesystem of docker/Dockerfile's image: mockdcp's virtualenv, the
interpreter it runs on with the part of the standard library a server can use, the
shared libraries all of their binaries link, a user and the scenarios directory. The
image is this tree on an empty base (``FROM scratch``), as distroless images are: no
shell, no package manager, no second copy of Python, none of the base's other files.

The build stage runs it with the venv's python, as root, after docker/slim.py. The
final stage runs docker/imagecheck.py in the assembled tree: that writes the bytecode of
the standard library modules the server imports and proves it serves without a file of
the base image (the build fails otherwise).

What is taken, from any Debian- or Ubuntu-based Python image (the official
``python:3.11-slim``, a distribution's python3 with its venv module):

* the virtualenv, as slim.py left it, and the interpreter it links to (the symlinks of
  ``bin/python3`` and the file they end at), at the same paths;
* the standard library (``sysconfig``'s ``stdlib`` and ``platstdlib``) without its
  bytecode and without what a server cannot import (``DEAD_STDLIB``: tests, IDLE,
  Tk, turtle, ensurepip's bundled wheels, lib2to3, distutils, the build configuration,
  the base's own site-packages);
* every shared library ``ldd`` lists for the interpreter and each extension module
  (the stdlib's ``lib-dynload``, the venv's), plus ``libgcc_s``, which glibc opens
  itself when a thread exits; an extension module of the stdlib whose libraries the
  base lacks (``_tkinter`` on a slim image) is left out, since it cannot load there
  either;
* ``/etc/ld.so.cache`` made for the tree (``ldconfig -r``), so that libraries outside
  the loader's default directories (``/usr/local/lib/libpython3.11.so`` in the official
  image) are found;
* ``/etc/passwd`` and ``/etc/group`` naming root and ``mockdcp`` (10001),
  ``/etc/nsswitch.conf`` (names from ``/etc/hosts``, then DNS, as Debian's), ``/tmp``,
  ``/scenarios`` and ``/var/lib/mockdcp`` (the TLS CA's directory; owned by ``mockdcp``).

Usage: python runtime.py ROOT
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

VENV = Path(sys.prefix)
USER = ("mockdcp", 10001)

#: standard library entries no server imports (names within the stdlib directory)
DEAD_STDLIB = (
    "__pycache__",
    "test",
    "tests",
    "idle_test",
    "idlelib",
    "tkinter",
    "turtle.py",
    "turtledemo",
    "ensurepip",
    "lib2to3",
    "distutils",
    "pydoc_data",
    "site-packages",
    "dist-packages",
    "config-*",
)


def copy_entry(path: Path, root: Path) -> None:
    """``path`` to the same place under ``root``: a symlink as a symlink, followed to
    what it names, a file with its mode; parent directories made as needed."""
    seen: set[Path] = set()
    while path not in seen:
        seen.add(path)
        dest = root / path.relative_to("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():
            target = os.readlink(path)
            if not dest.is_symlink():
                dest.symlink_to(target)
            path = Path(os.path.normpath(path.parent / target))
            continue
        if not dest.exists():
            shutil.copy2(path, dest)
        return


def link_top_level(root: Path) -> None:
    """The base's top-level symlinks (``/lib -> usr/lib`` on a merged ``/usr``), so that
    files copied by either name land once, where the loader looks."""
    for entry in sorted(Path("/").iterdir()):
        if entry.is_symlink():
            target = os.readlink(entry)
            if os.path.isabs(target):
                target = os.path.relpath(target, "/")
            (root / entry.name).symlink_to(target)
            if entry.is_dir():  # what it names, so that files can go there through it
                (root / target).mkdir(parents=True, exist_ok=True)


def copy_tree(source: Path, root: Path, dead: tuple[str, ...]) -> None:
    dest = root / source.relative_to("/")
    shutil.copytree(
        source, dest, symlinks=True, ignore=shutil.ignore_patterns(*dead), dirs_exist_ok=True
    )


def stdlib_dirs() -> list[Path]:
    paths = sysconfig.get_paths()
    return sorted({Path(paths["stdlib"]), Path(paths["platstdlib"])})


def elf_files(tree: Path) -> list[Path]:
    """Shared objects and executables under ``tree``, found by their magic number."""
    found = []
    for path in sorted(tree.rglob("*")):
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as f:
                if f.read(4) == b"\x7fELF":
                    found.append(path)
    return found


def libraries(binary: Path) -> tuple[list[Path], list[str]]:
    """What ``ldd`` resolves for ``binary`` (the loader included), and what it cannot:
    its lines read "name => /path (0x...)", "/path (0x...)" or "name => not found"."""
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False)
    resolved: list[Path] = []
    missing: list[str] = []
    for line in out.stdout.splitlines():
        name, arrow, where = line.strip().rpartition(" => ")
        if arrow and where.startswith("not found"):
            missing.append(name)
            continue
        path = where.split(" (", 1)[0]
        if path.startswith("/"):
            resolved.append(Path(path))
    return resolved, missing


def write_etc(root: Path) -> None:
    name, uid = USER
    etc = root / "etc"
    etc.mkdir(exist_ok=True)
    (etc / "passwd").write_text(
        "root:x:0:0:root:/root:/usr/sbin/nologin\n"
        f"{name}:x:{uid}:{uid}::/nonexistent:/usr/sbin/nologin\n"
    )
    (etc / "group").write_text(f"root:x:0:\n{name}:x:{uid}:\n")
    (etc / "nsswitch.conf").write_text("passwd: files\ngroup: files\nhosts: files dns\n")
    # var/lib/mockdcp: where `mockdcp serve --tls` keeps its CA (MOCKDCP_TLS_DIR), the
    # user's own and private; a volume there keeps the CA across containers
    dirs = (("tmp", 0o1777, 0), ("scenarios", 0o755, uid), ("var/lib/mockdcp", 0o700, uid))
    for directory, mode, owner in dirs:
        path = root / directory
        path.mkdir(parents=True, exist_ok=True)
        os.chown(path, owner, owner)
        path.chmod(mode)


def main(argv: list[str]) -> None:
    root = Path(argv[0])
    if root.exists():
        raise SystemExit(f"{root} exists: give runtime.py a new directory")
    root.mkdir(parents=True)
    link_top_level(root)
    for directory in stdlib_dirs():
        copy_tree(directory, root, DEAD_STDLIB)
    copy_tree(VENV, root, ())
    copy_entry(VENV / "bin" / "python3", root)  # the interpreter's symlinks and file
    interpreter = Path(os.path.realpath(VENV / "bin" / "python3"))
    binaries = [interpreter]
    for directory in [*stdlib_dirs(), VENV]:
        binaries += elf_files(root / directory.relative_to("/"))
    needed: set[Path] = set()
    for binary in binaries:
        libs, missing = libraries(binary)
        if missing:
            if binary.is_relative_to(root / VENV.relative_to("/")):
                raise SystemExit(f"{binary}: the base lacks {', '.join(missing)}")
            print(f"runtime.py: left out {binary.name}, the base lacks {', '.join(missing)}")
            binary.unlink()
            continue
        needed.update(libs)
    for lib in sorted(needed):
        if not lib.is_relative_to(root):  # the venv's bundled libraries are there already
            copy_entry(lib, root)
    libc_dirs = {lib.parent for lib in needed if lib.name.startswith("libc.so")}
    for directory in libc_dirs:  # glibc dlopens libgcc_s when a thread exits
        for gcc_s in directory.glob("libgcc_s.so*"):
            copy_entry(gcc_s, root)
    lib_dirs = sorted({str(lib.parent) for lib in needed if not lib.is_relative_to(root)})
    write_etc(root)
    (root / "etc" / "ld.so.conf").write_text("".join(f"{d}\n" for d in lib_dirs))
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    subprocess.run([ldconfig, "-r", str(root)], check=True)


if __name__ == "__main__":
    main(sys.argv[1:])
