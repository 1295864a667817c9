"""llama.cpp, compiled once at setup from the sdist of the llama-cpp-python version installed (pyproject pins it): llama.cpp's own
`llama-server` (the embedded stage-1 server: its slots keep their rate with requests in flight, docs/results.md)
and the shared libraries llama-cpp-python loads (installed with its own compile switched off), so that a fresh
machine compiles llama.cpp once, not twice.

    PYTHONPATH=. python tasks/llm/llama_build.py build VERSION    # compile into the cache (standard library only:
                                                                  # setup runs it while pip installs the rest)
    python -m tasks.llm.llama_build                               # build or reuse; link it into this venv

The build is cached under $STSGEN_HOME/build/llama.cpp-<version>-<digest of flags, CPU and profile>/ (like pip's wheel
cache: a new venv reuses it); extra CMake flags (e.g. `-DGGML_CUDA=ON` on a GPU node) come from
$STSGEN_LLAMA_CMAKE_ARGS and are part of the cache key. The build profile (llama_profile.cmake: unity batches and low
-O levels outside ggml's kernels, half the compile) applies unless those flags hold `-DSTSGEN_LLAMA_PROFILE=OFF`.
Nothing is downloaded beyond the sdist itself (pip, from the package index).
"""

from __future__ import annotations

import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from importlib import metadata
from pathlib import Path

from tasks.core.home import stsgen_home

PACKAGE = "llama-cpp-python"
# Only what llama-server needs: no tests, examples or other tools; no web UI (its assets would be fetched from the
# network at build time); no OpenSSL (the server listens on loopback). Libraries shared, found next to the binary.
CMAKE_FLAGS = ["-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=ON", "-DLLAMA_BUILD_TESTS=OFF",
               "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_SERVER=ON",
               "-DLLAMA_BUILD_APP=OFF", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_OPENSSL=OFF",
               "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON", "-DCMAKE_INSTALL_RPATH=$ORIGIN"]
BINARY = "llama-server"
# Which targets compile at -O0 / -O1 (not ggml's kernels): setup's compile is shorter, the server as fast.
PROFILE = Path(__file__).with_name("llama_profile.cmake")
# Where the build is linked into a venv: the binary and its libraries together (their RPATH is $ORIGIN).
VENV_DIR = Path("lib") / "llama.cpp"


# ggml's AMX kernels (compiled in by -march=native on Sapphire Rapids and later) crash with SIGSEGV in the first
# matrix product on the virtual machines seen here (amx_tile/amx_int8 advertised in /proc/cpuinfo); AMX only pays on
# large prompt batches, so the build leaves it out on x86-64 (GCC: an explicit -mno-* wins over -march=native).
NO_AMX = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"


def compiler_accepts(flags: str) -> bool:
    """Whether the C compiler CMake will pick (CC, else cc) compiles an empty file with `flags` (GCC/clang ≤ 10 know
    no -mno-amx-*)."""
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if not compiler:
        return False
    done = subprocess.run([compiler, *shlex.split(flags), "-x", "c", "-c", "-o", os.devnull, "-"], input=b"",
                          capture_output=True)
    return done.returncode == 0


def platform_cmake_flags() -> list[str]:
    if platform.machine().lower() not in ("x86_64", "amd64") or not compiler_accepts(NO_AMX):
        return []
    return [f"-DCMAKE_C_FLAGS={NO_AMX}", f"-DCMAKE_CXX_FLAGS={NO_AMX}"]


def cmake_flags() -> list[str]:
    """The build's flags; a user's CMAKE_C_FLAGS / CMAKE_CXX_FLAGS (STSGEN_LLAMA_CMAKE_ARGS) extend ours rather than
    replace them (CMake keeps the last -D of a name)."""
    ours = {f.split("=", 1)[0]: f.split("=", 1)[1] for f in platform_cmake_flags()}
    extra = []
    for flag in extra_cmake_flags():
        name, _, value = flag.partition("=")
        if name in ours:
            ours[name] = f"{ours[name]} {value}".strip()
        else:
            extra.append(flag)
    return CMAKE_FLAGS + [f"{name}={value}" for name, value in ours.items()] + extra


def extra_cmake_flags() -> list[str]:
    return shlex.split(os.environ.get("STSGEN_LLAMA_CMAKE_ARGS", ""))


def cpu_signature() -> str:
    """The build is -march=native: a home shared by machines with other CPUs must not reuse it."""
    try:
        flags = next((line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")), "")
    except OSError:
        flags = ""
    return f"{platform.machine()} {' '.join(sorted(set(flags.split()[2:])))}"


def build_key(version: str, flags: list[str], profile: Path | None = PROFILE) -> str:
    """The flags, the optimisation profile's text and the CPU: a change to any of them is another build."""
    profile_text = profile.read_bytes() if profile else b"release"
    digest = hashlib.sha256(" ".join(flags).encode() + b"\0" + cpu_signature().encode() + b"\0"
                            + profile_text).hexdigest()[:12]
    return f"llama.cpp-{version}-{digest}"


def cached_build(version: str, flags: list[str], profile: Path | None = PROFILE) -> Path:
    return stsgen_home() / "build" / build_key(version, flags, profile)


def installed_dir(prefix: str | Path = sys.prefix) -> Path:
    """The venv's copy of the build (bin + libraries)."""
    return Path(prefix) / VENV_DIR


def server_binary(prefix: str | Path = sys.prefix) -> Path | None:
    """The venv's llama-server, or None when setup has not built it (llama-cpp-python's server is the fallback)."""
    path = installed_dir(prefix) / BINARY
    return path if path.is_file() and os.access(path, os.X_OK) else None


def fetch_sdist(version: str, into: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
                    "--no-binary", ":all:", f"{PACKAGE}=={version}", "-d", str(into)], check=True)
    archive = next(into.glob("llama_cpp_python-*.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / archive.name.removesuffix(".tar.gz") / "vendor" / "llama.cpp"


def compile_server(source: Path, build: Path, flags: list[str], jobs: int, profile: Path | None = PROFILE) -> Path:
    """`profile`: the optimisation profile (a CMake file included after `project()`), None for -O3 throughout."""
    cmake = shutil.which("cmake") or str(Path(sys.executable).with_name("cmake"))
    generator = [] if shutil.which("make") else ["-G", "Ninja"]  # setup installs ninja where make is missing
    include = [f"-DCMAKE_PROJECT_INCLUDE={profile}"] if profile else []
    subprocess.run([cmake, "-S", str(source), "-B", str(build), *generator, *flags, *include], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run([cmake, "--build", str(build), "--target", BINARY, "-j", str(jobs)], check=True,
                   stdout=subprocess.DEVNULL)
    return build / "bin"


def build(version: str, flags: list[str], jobs: int | None = None, profile: Path | None = PROFILE) -> Path:
    """The cached build folder (llama-server and its .so files), compiling it first if it is not there."""
    target = cached_build(version, flags, profile)
    if (target / BINARY).is_file():
        return target
    jobs = jobs or os.cpu_count() or 1
    print(f"stsgen: compiling llama.cpp's {BINARY} from {PACKAGE} {version} (once; 2.5–6 min on 2 cores, by machine)…",
          file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="stsgen-llama-build-") as tmp:
        source = fetch_sdist(version, Path(tmp))
        built = compile_server(source, Path(tmp) / "build", flags, jobs, profile)
        staging = target.with_name(target.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for path in built.iterdir():
            if path.name == BINARY or ".so" in path.name:
                shutil.copy2(path, staging / path.name, follow_symlinks=False)
        staging.rename(target)  # complete or absent: an interrupted build is redone, never half-used
    return target


def link_into_venv(built: Path, prefix: str | Path = sys.prefix) -> Path:
    """Copy the build into the venv; point llama-cpp-python (installed without its own compile) at its libraries."""
    dest = installed_dir(prefix)
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(built, dest, symlinks=True)
    package_lib = Path(sysconfig.get_paths(vars={"base": str(prefix), "platbase": str(prefix)})["platlib"]) \
        / "llama_cpp" / "lib"
    package_lib.mkdir(parents=True, exist_ok=True)
    for lib in dest.glob("*.so*"):
        link = package_lib / lib.name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(lib)
    return dest


def main(argv: list[str]) -> None:
    flags = cmake_flags()
    if argv[:1] == ["build"] and len(argv) == 2:  # setup, before the dependencies are installed
        print(f"stsgen: {build(argv[1], flags)}", file=sys.stderr)
        return
    try:  # the libraries must match the Python bindings installed (setup installs the version pyproject pins)
        version = metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        sys.exit(f"stsgen: {PACKAGE} is not installed in {sys.prefix}: run ./stsgen setup")
    dest = link_into_venv(build(version, flags))
    print(f"stsgen: {dest / BINARY}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
