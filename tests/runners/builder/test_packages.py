"""A benchmark's extra packages: installed by the real pip from the worker's wheelhouse (a
folder of wheels written here, no index), cached like builds, put on the engine's path; bad
requirements refused by the contract; a GGUF model without a GGUF loader refused before the
engine starts."""
import base64
import dataclasses
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from runners.builder.errors import BuildFailure
from runners.builder.prepare import prepare_engine
from runners.contract import JobSpec, SpecError, check_packages

SPEC = {"model": "/models/tiny", "prompt": "hi", "max_tokens": 4, "repeats": 1}
PLUGIN = "bench-gguf-loader"


def write_wheel(folder: Path, name: str, version: str, module: str, entry_points: str = "") -> Path:
    """A pure-Python wheel as pip installs it: the module, METADATA, WHEEL, entry points, RECORD."""
    dist = f"{name.replace('-', '_')}-{version}"
    files = {f"{module}/__init__.py": f"VERSION = {version!r}\n",
             f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: bench-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    if entry_points:
        files[f"{dist}.dist-info/entry_points.txt"] = entry_points
    record = [f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},"
              f"{len(text.encode())}" for path, text in files.items()]
    files[f"{dist}.dist-info/RECORD"] = "\n".join([*record, f"{dist}.dist-info/RECORD,,"]) + "\n"
    wheel = folder / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
    return wheel


@pytest.fixture
def wheelhouse(tmp_path):
    folder = tmp_path / "wheels"
    folder.mkdir()
    write_wheel(folder, PLUGIN, "0.1.0", "bench_gguf_loader", "[vllm.general_plugins]\ngguf = bench_gguf_loader:x\n")
    write_wheel(folder, "bench-helper", "2.0", "bench_helper")
    return folder


def test_packages_come_from_the_wheelhouse_once_and_reach_the_engine_path(build_config, wheelhouse):
    config = dataclasses.replace(build_config, wheelhouse=wheelhouse)
    spec = JobSpec.from_dict({**SPEC, "packages": [f"{PLUGIN}==0.1.0", "bench-helper"]})
    first = prepare_engine(spec, config)
    site = Path(first.pythonpath)
    assert (site / "bench_gguf_loader" / "__init__.py").is_file() and (site / "bench_helper").is_dir()
    assert first.info["packages"] == [f"{PLUGIN}==0.1.0", "bench-helper"] and "packages cache miss" in first.log
    out = subprocess.run([sys.executable, "-c", "import bench_gguf_loader; print(bench_gguf_loader.VERSION)"],
                         env={"PYTHONPATH": first.pythonpath}, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0.1.0"
    again = prepare_engine(spec, config)
    assert again.pythonpath == first.pythonpath and "packages cache hit" in again.log


def test_a_package_missing_from_the_wheelhouse_or_no_wheelhouse_fails_the_build_with_the_reason(build_config,
                                                                                               wheelhouse):
    spec = JobSpec.from_dict({**SPEC, "packages": [f"{PLUGIN}==9.9"]})
    with pytest.raises(BuildFailure, match=r"cannot install bench-gguf-loader==9.9 from the wheelhouse .*"
                                           r"No matching distribution") as failed:
        prepare_engine(spec, dataclasses.replace(build_config, wheelhouse=wheelhouse))
    assert failed.value.kind == "build" and "installing packages" in failed.value.log
    with pytest.raises(BuildFailure, match="no wheelhouse to install them from: set BENCH_WHEELHOUSE"):
        prepare_engine(spec, build_config)


def test_a_gguf_model_needs_a_gguf_loader_before_the_engine_starts(build_config, wheelhouse):
    gguf = {**SPEC, "model": "/models/glm-q8_0.gguf"}
    with pytest.raises(BuildFailure, match=r"is a GGUF file and this worker has no GGUF loader: .*vllm-gguf-plugin"):
        prepare_engine(JobSpec.from_dict(gguf), build_config)
    with_plugin = JobSpec.from_dict({**gguf, "packages": [PLUGIN]})
    assert prepare_engine(with_plugin, dataclasses.replace(build_config, wheelhouse=wheelhouse)).pythonpath


@pytest.mark.parametrize("bad", ["--index-url=https://evil", "foo @ https://x/foo.whl", "foo; os_name == 'nt'",
                                 "-e .", "./local.whl", "two words", ""])
def test_a_requirement_that_is_not_a_name_and_version_is_refused(bad):
    with pytest.raises(SpecError, match=r"packages\[0\]: .* is not a requirement like name==1.2"):
        JobSpec.from_dict({**SPEC, "packages": [bad]})
    assert check_packages(["vllm-gguf-plugin==0.1.0", "gguf>=0.17,<1", "x[extra]"])[1] == "gguf>=0.17,<1"
