"""The llama.cpp build of setup (tasks/llm/llama_build.py): the installed llama-cpp-python is the pinned one, extra CMake
flags change the cache key, a cached build is reused without compiling, and linking a build into a venv gives
llama-server its libraries beside it and llama-cpp-python (installed without its own compile) the same libraries;
the build profile (tasks/llm/llama_profile.cmake) builds what it says and is part of the cache key."""

from __future__ import annotations

import os
import re
import sysconfig
from importlib import metadata
from pathlib import Path

import pytest

from tasks.llm import llama_build
from tests.conftest import PROJECT


def pinned_version() -> str:
    found = re.search(r'"llama-cpp-python\[server\]==([0-9.]+)"', (PROJECT / "pyproject.toml").read_text())
    return found.group(1)


def test_the_pinned_version_is_installed_and_the_dockerfile_installs_it():
    assert pinned_version() == metadata.version("llama-cpp-python")
    assert f'"llama-cpp-python[server]=={pinned_version()}"' in (PROJECT / "Dockerfile").read_text()


def test_extra_cmake_flags_are_part_of_the_cache_key(monkeypatch):
    base = llama_build.build_key("0.3.36", llama_build.CMAKE_FLAGS + llama_build.extra_cmake_flags())
    monkeypatch.setenv("STSGEN_LLAMA_CMAKE_ARGS", "-DGGML_CUDA=ON")
    cuda = llama_build.build_key("0.3.36", llama_build.CMAKE_FLAGS + llama_build.extra_cmake_flags())
    assert base != cuda and base.startswith("llama.cpp-0.3.36-") and cuda.startswith("llama.cpp-0.3.36-")


def test_amx_is_left_out_on_x86_64_and_the_cpu_is_part_of_the_cache_key(monkeypatch):
    monkeypatch.setattr(llama_build.platform, "machine", lambda: "x86_64")
    flags = llama_build.platform_cmake_flags()
    assert flags and all("-mno-amx-tile" in f and "-mno-amx-int8" in f for f in flags)
    monkeypatch.setattr(llama_build.platform, "machine", lambda: "aarch64")
    assert llama_build.platform_cmake_flags() == []  # GCC on ARM knows no -mno-amx-*
    here = llama_build.build_key("0.3.36", llama_build.CMAKE_FLAGS)
    monkeypatch.setattr(llama_build, "cpu_signature", lambda: "x86_64 avx2 fma")
    assert llama_build.build_key("0.3.36", llama_build.CMAKE_FLAGS) != here  # -march=native: another CPU rebuilds


def test_a_users_compiler_flags_extend_the_no_amx_flags_and_an_old_compiler_gets_none(monkeypatch):
    monkeypatch.setattr(llama_build, "platform_cmake_flags", lambda: [f"-DCMAKE_C_FLAGS={llama_build.NO_AMX}",
                                                                     f"-DCMAKE_CXX_FLAGS={llama_build.NO_AMX}"])
    monkeypatch.setenv("STSGEN_LLAMA_CMAKE_ARGS", "-DCMAKE_C_FLAGS=-O3 -DGGML_CUDA=ON")
    flags = llama_build.cmake_flags()
    assert f"-DCMAKE_C_FLAGS={llama_build.NO_AMX} -O3" in flags and "-DGGML_CUDA=ON" in flags
    assert sum(f.startswith("-DCMAKE_C_FLAGS=") for f in flags) == 1  # one, merged: CMake keeps only the last
    monkeypatch.undo()
    monkeypatch.setattr(llama_build.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(llama_build, "compiler_accepts", lambda flags: False)  # GCC ≤ 10: no -mno-amx-*
    assert llama_build.platform_cmake_flags() == []


def test_the_compiler_probe_rejects_a_flag_the_compiler_does_not_know():
    assert not llama_build.compiler_accepts("-mno-such-flag-stsgen")


def fake_build(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "llama-server").write_text("#!/bin/sh\n")
    (folder / "llama-server").chmod(0o755)
    (folder / "libllama.so.0.5.0").write_bytes(b"\x7fELF")
    (folder / "libllama.so.0").symlink_to("libllama.so.0.5.0")
    return folder


def test_a_cached_build_is_reused_without_compiling(tmp_path, monkeypatch):
    monkeypatch.setenv("STSGEN_HOME", str(tmp_path))
    flags = llama_build.CMAKE_FLAGS
    fake_build(llama_build.cached_build("0.3.36", flags))
    monkeypatch.setattr(llama_build, "compile_server", lambda *a, **k: pytest.fail("compiled again"))
    monkeypatch.setattr(llama_build, "fetch_sdist", lambda *a, **k: pytest.fail("downloaded again"))
    assert llama_build.build("0.3.36", flags) == llama_build.cached_build("0.3.36", flags)


def test_linking_into_a_venv_puts_the_libraries_beside_the_server_and_under_llama_cpp(tmp_path):
    built = fake_build(tmp_path / "build")
    prefix = tmp_path / "venv"
    dest = llama_build.link_into_venv(built, prefix)
    assert llama_build.server_binary(prefix) == dest / "llama-server"
    assert (dest / "libllama.so.0").is_symlink() and os.readlink(dest / "libllama.so.0") == "libllama.so.0.5.0"
    package_lib = Path(sysconfig.get_paths(vars={"base": str(prefix), "platbase": str(prefix)})["platlib"]) \
        / "llama_cpp" / "lib"
    assert (package_lib / "libllama.so.0").resolve() == (dest / "libllama.so.0.5.0").resolve()
    assert llama_build.server_binary(tmp_path / "elsewhere") is None


def test_the_compile_step_needs_only_the_standard_library():
    """Setup compiles llama.cpp while pip is still installing the dependencies: the module must load without them."""
    import subprocess
    import sys

    blocked = ("pydantic", "openai", "prefect", "torch", "numpy", "yaml")
    code = (f"import sys, runpy\nfor m in {blocked!r}: sys.modules[m] = None\n"
            "runpy.run_path('tasks/llm/llama_build.py', run_name='loaded')")
    done = subprocess.run([sys.executable, "-c", code], cwd=PROJECT, env=dict(os.environ, PYTHONPATH=str(PROJECT)),
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_profile_builds_the_request_code_in_unity_batches_and_leaves_the_kernels_as_released(tmp_path):
    """Configure a project with llama.cpp's target names and directory layout through the profile (as setup passes
    it) and read the compile commands CMake writes: common's, the server's and the multimodal library's sources in
    unity batches (the sources that do not compile in one kept apart), ggml's kernels at the release -O3, libllama at
    -O1, the rest at -O0; -DSTSGEN_LLAMA_PROFILE=OFF builds every source on its own at -O3."""
    import json
    import shutil
    import subprocess

    cmake = shutil.which("cmake")
    if not cmake or not shutil.which("make"):
        pytest.skip("cmake and make are not installed")
    # {directory: {target: sources}}, as in llama.cpp's tree (each target made in its own directory's CMakeLists)
    layout = {"ggml": {"ggml": ["ggml.cpp"]}, "src": {"llama": ["llama.cpp"]},
              "vendor": {"cpp-httplib": ["httplib.cpp"]},
              "common": {"llama-common": ["arg.cpp", "chat.cpp", "json.cpp"]},
              "tools/mtmd": {"mtmd": ["mtmd.cpp", "mtmd-audio.cpp", "mtmd-image.cpp", "mtmd-helper.cpp",
                                      "mtmd-helper-gen.cpp", "clip.cpp", "models/llava.cpp", "models/qwen2vl.cpp"]},
              "tools/server": {"server-context": ["server-context.cpp", "server-task.cpp"],
                               "llama-server-impl": ["server.cpp", "server-http.cpp"]}}
    src = tmp_path / "src"
    for n, (folder, targets) in enumerate(layout.items()):
        for target, files in targets.items():
            for i, name in enumerate(files):
                (src / folder / name).parent.mkdir(parents=True, exist_ok=True)
                (src / folder / name).write_text(f"int f{n}_{i}_{len(target)}() {{ return 0; }}\n")
        (src / folder / "CMakeLists.txt").write_text(
            "".join(f"add_library({t} STATIC {' '.join(f)})\n" for t, f in targets.items()))
    (src / "CMakeLists.txt").write_text('cmake_minimum_required(VERSION 3.14)\nproject("llama.cpp" CXX)\n'
                                        + "".join(f"add_subdirectory({folder})\n" for folder in layout))

    def compiled(*extra: str) -> dict:
        """{compiled file (relative to the tree; a unity batch as `<target>:unity`): its last -O level}."""
        build = tmp_path / f"build{len(extra)}"
        subprocess.run([cmake, "-S", str(src), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                        "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON", f"-DCMAKE_PROJECT_INCLUDE={llama_build.PROFILE}",
                        *extra], check=True, capture_output=True)
        found = {}
        for command in json.loads((build / "compile_commands.json").read_text()):
            file = Path(command["file"])
            name = (f"{file.parent.parent.name.removesuffix('.dir')}:unity" if file.parent.name == "Unity"
                    else str(file.relative_to(src)))
            found.setdefault(name, set()).add(re.findall(r"-O[0-3s]", command["command"])[-1])
        return found

    mtmd_apart = ["mtmd.cpp", "mtmd-audio.cpp", "mtmd-image.cpp", "mtmd-helper.cpp", "mtmd-helper-gen.cpp", "clip.cpp"]
    assert compiled() == {"ggml/ggml.cpp": {"-O3"}, "src/llama.cpp": {"-O1"}, "vendor/httplib.cpp": {"-O0"},
                          "llama-common:unity": {"-O0"}, "common/json.cpp": {"-O0"},
                          "mtmd:unity": {"-O0"}, **{f"tools/mtmd/{f}": {"-O0"} for f in mtmd_apart},
                          "server-context:unity": {"-O0"}, "llama-server-impl:unity": {"-O0"}}
    released = compiled("-DSTSGEN_LLAMA_PROFILE=OFF")
    assert sorted(released) == sorted(f"{folder}/{name}" for folder, targets in layout.items()
                                      for files in targets.values() for name in files)
    assert set().union(*released.values()) == {"-O3"}


def test_the_compile_passes_the_profile_to_cmake_and_none_builds_as_released(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(llama_build.subprocess, "run", lambda argv, **kw: calls.append(argv))
    llama_build.compile_server(tmp_path / "src", tmp_path / "build", ["-DX=1"], 2)
    llama_build.compile_server(tmp_path / "src", tmp_path / "build", ["-DX=1"], 2, profile=None)
    configure_light, _, configure_released, _ = calls
    assert f"-DCMAKE_PROJECT_INCLUDE={llama_build.PROFILE}" in configure_light and "-DX=1" in configure_light
    assert not any(a.startswith("-DCMAKE_PROJECT_INCLUDE") for a in configure_released)


def test_the_profile_is_part_of_the_cache_key(tmp_path):
    profile = tmp_path / "profile.cmake"
    profile.write_text(llama_build.PROFILE.read_text().replace("UNITY_BUILD_BATCH_SIZE 16", "UNITY_BUILD_BATCH_SIZE 8"))
    light = llama_build.build_key("0.3.36", llama_build.CMAKE_FLAGS)
    assert light != llama_build.build_key("0.3.36", llama_build.CMAKE_FLAGS, profile)
    assert light != llama_build.build_key("0.3.36", llama_build.CMAKE_FLAGS, None)  # the release build is another
