"""The source-build path, through the same build code as vLLM's, on a tiny C-extension package
in a git repository made here (a vLLM source build does not fit a 2-core machine)."""
import sys
from dataclasses import replace

import pytest

from runners.builder.config import BuildConfig
from runners.builder.errors import BuildFailure
from runners.builder.prepare import prepare_engine
from runners.contract import JobSpec

from .conftest import Remote
from .test_prepare import run_python

SETUP = """from setuptools import Extension, setup
setup(name="tinyext", version="1.0", packages=["tinyext"],
      ext_modules=[Extension("tinyext._fast", ["csrc/fast.c"])])
"""
FAST_C = """#include <Python.h>
static PyObject *answer(PyObject *self, PyObject *args) { return PyLong_FromLong(%d); }
static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fast", NULL, -1, methods};
PyMODINIT_FUNC PyInit__fast(void) { return PyModule_Create(&module); }
"""
BUILD = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
         "--target", "{prefix}", "{src}"]


@pytest.fixture
def tinyext(tmp_path):
    (tmp_path / "repo").mkdir()
    remote = Remote(tmp_path / "repo")
    remote.commit({"setup.py": SETUP, "csrc/fast.c": FAST_C % 41, "tinyext/__init__.py": "from ._fast import answer\n",
                   "tinyext/_version.py": "__version__ = version = '1.0'\n"}, "base")
    remote.tag("v1")
    installed = tmp_path / "site" / "tinyext"  # the worker's "installed" package: the base's Python files
    installed.mkdir(parents=True)
    for rel in ("__init__.py", "_version.py"):
        (installed / rel).write_text((remote.work / "tinyext" / rel).read_text())
    config = BuildConfig(cache_dir=tmp_path / "cache", base_ref="v1", allow_file_urls=True,
                         package="tinyext", package_root=installed)
    return remote, config


def spec(remote, commit):
    return JobSpec.from_dict({"model": "m", "prompt": "p", "max_tokens": 4, "repeats": 1,
                              "engine": {"kind": "git", "repo": remote.url, "commit": commit}})


def test_c_source_change_is_built_with_the_configured_command(tinyext):
    remote, config = tinyext
    sha = remote.commit({"csrc/fast.c": FAST_C % 42}, "faster answer")
    prepared = prepare_engine(spec(remote, sha), replace(config, source_build_command=BUILD))
    assert prepared.info["path"] == "source" and prepared.info["commit"] == sha
    assert prepared.info["engine_version"] == "1.0"
    assert run_python(prepared.pythonpath, "import tinyext; print(tinyext.answer())") == "42"
    assert "source build exit 0" in prepared.log
    again = prepare_engine(spec(remote, sha), replace(config, source_build_command=BUILD))
    assert again.info["cache_hit"] and again.pythonpath == prepared.pythonpath


def test_same_change_is_refused_without_a_build_command(tinyext):
    remote, config = tinyext
    sha = remote.commit({"csrc/fast.c": FAST_C % 42}, "faster answer")
    with pytest.raises(BuildFailure, match=r"changes compiled sources \(csrc/fast.c\)"):
        prepare_engine(spec(remote, sha), config)


def test_failing_source_build_fails_the_build_with_its_output(tinyext):
    remote, config = tinyext
    sha = remote.commit({"csrc/fast.c": "this is not C\n"}, "broken")
    with pytest.raises(BuildFailure, match="source build failed") as err:
        prepare_engine(spec(remote, sha), replace(config, source_build_command=BUILD))
    assert err.value.kind == "build" and "fast.c" in err.value.log
