"""Slim the virtualenv docker/Dockerfile installs mockdcp into (its build stage runs this
with the venv's python, as root): drop what the server never loads, then prove it still
serves.

1. Delete what no import reaches: test suites (numpy's, trio's), numpy's test-only
   extension modules, f2py, numpy.distutils, C headers and static libraries, Cython
   declarations (``*.pxd``), type stubs (``*.pyi``), Faker's Sphinx extension, the venv's
   activation scripts and the console scripts of the deleted parts, and every
   ``__pycache__``.
2. Run the image's work (docker/imagecheck.py), writing bytecode: ``mockdcp serve
   --docs 1000`` streamed to the end by ``mockdcp tail``, its health and state
   endpoints, a bundled scenario validated and served. The ``.pyc`` files this leaves
   are those of the modules the server imports: the image keeps exactly those (its user
   cannot write ``__pycache__``, and startup must not compile), and ships the sources of
   the rest uncompiled (pygments, which rich imports only for syntax highlighting and
   tracebacks, numpy.ma, ...).
3. Delete the Faker locales the document generator did not import. Faker lists its
   locales from the provider packages' directories (``faker/utils/loading.py``) and loads
   only the requested one (``Faker()``: en_US, with the ``en`` address and ``en_GB`` bank
   modules its own build on), so what the generator imported is all it needs; the other
   80-odd locales are most of Faker's 25 MB.
4. Compile the rest of mockdcp's own modules, then run step 2 again without writing
   bytecode: the build fails if the pruned environment cannot serve and stream.

What stays although the server hardly uses it: numpy.libs, the OpenBLAS numpy bundles
(28 MB), which numpy's core extension links (``ldd numpy/_core/_multiarray_umath*.so``),
so numpy cannot import without it; pygments (5 MB of sources), since rich's tracebacks
and syntax highlighting import it. numpy's shared objects are not stripped (2.5 MB)
because the default base has no binutils.

Usage: python slim.py  (the venv is the running interpreter's).
"""

from __future__ import annotations

import compileall
import json
import shutil
import subprocess
import sys
import tempfile
from typing import TYPE_CHECKING

from imagecheck import DOCS, SITE, VENV, environment, run_the_image

if TYPE_CHECKING:
    from pathlib import Path

DEAD = (
    "**/__pycache__",
    "**/*.pyi",
    "**/*.pxd",
    # test suites shipped inside packages (numpy's, trio's, sniffio's)
    "*/**/tests",
    "*/**/_tests",
    "numpy/conftest.py",
    "numpy/f2py",
    "numpy/distutils",
    "numpy/_pyinstaller",
    "numpy/_core/include",
    "numpy/_core/lib",
    # extension modules only numpy's own tests import
    "numpy/_core/_multiarray_tests.*.so",
    "numpy/_core/_operand_flag_tests.*.so",
    "numpy/_core/_rational_tests.*.so",
    "numpy/_core/_struct_ufunc_tests.*.so",
    "numpy/_core/_umath_tests.*.so",
    "numpy/_core/_simd.*.so",
    "faker/sphinx",
)
DEAD_SCRIPTS = ("f2py", "numpy-config", "Activate.ps1", "activate", "activate.csh", "activate.fish")


def remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def delete_dead_weight() -> None:
    for pattern in DEAD:
        for path in sorted(SITE.glob(pattern), reverse=True):
            remove(path)
    for name in DEAD_SCRIPTS:
        remove(VENV / "bin" / name)
    remove(VENV / "include")  # C headers of packages built in the venv: none here


def faker_modules(env: dict[str, str]) -> set[str]:
    """The faker modules the document generator imports, in a process of its own (with
    a cache directory of its own: its Faker pools are drawn, not read back)."""
    probe = (
        "import json, sys\n"
        "from mockdcp.data._dataset import faker_documents\n"
        f"assert len(list(faker_documents({DOCS}))) == {DOCS}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('faker'))))\n"
    )
    with tempfile.TemporaryDirectory(prefix="mockdcp-slim-") as cache:
        out = subprocess.run(
            [sys.executable, "-c", probe],
            env={**env, "MOCKDCP_CACHE": cache},
            capture_output=True,
            text=True,
            check=True,
        )
    modules: list[str] = json.loads(out.stdout)
    return set(modules)


def prune_faker_locales(used: set[str]) -> None:
    """Delete each provider's locale packages that ``used`` does not name."""
    providers = SITE / "faker" / "providers"
    for provider in sorted(p for p in providers.iterdir() if (p / "__init__.py").exists()):
        for locale in sorted(provider.iterdir()):
            module = f"faker.providers.{provider.name}.{locale.name}"
            if (locale / "__init__.py").exists() and module not in used:
                shutil.rmtree(locale)


def main() -> None:
    delete_dead_weight()
    writing = environment(write_bytecode=True)
    used = faker_modules(writing)
    if "faker.providers.person.en_US" not in used:
        raise SystemExit(f"unexpected: the generator imported no en_US locale ({used})")
    run_the_image(writing)
    prune_faker_locales(used)
    compileall.compile_dir(SITE / "mockdcp", quiet=1, workers=1)
    checking = environment(write_bytecode=False)
    if faker_modules(checking) != used:
        raise SystemExit("the pruned Faker imports other modules than before")
    run_the_image(checking)


if __name__ == "__main__":
    main()
