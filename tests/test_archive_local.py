"""The cold archive contract on a local directory, plus what only a directory has: URLs, temporary
files, file modes, emptied directories and keys that collide with directories."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from memory.archive.local import LocalColdStore
from memory.errors import ConfigurationError, Conflict, TransientError
from memory.registry import BACKENDS, open_backend
from memory.settings import Settings
from tests.archive_contract import ColdStoreContract


class TestLocalColdStore(ColdStoreContract):
    @pytest.fixture
    def store(self, tmp_path):
        return LocalColdStore(tmp_path / "archive")


def files_under(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


def test_the_registry_maps_file_urls_to_the_adapter():
    assert BACKENDS["archive"]["file"] == ("memory.archive.local:LocalColdStore", "")


def test_the_default_archive_is_a_directory_in_data_dir(tmp_path):
    settings = Settings(data_dir=tmp_path / "data")
    store = open_backend("archive", settings.archive, settings)
    assert isinstance(store, LocalColdStore) and store.root == (tmp_path / "data" / "archive").resolve()
    assert store.root.is_dir()
    store.ping()


def test_file_urls_name_an_absolute_directory(tmp_path):
    assert LocalColdStore.from_url(f"file://{tmp_path}/a%20b", Settings()).root == tmp_path / "a b"
    assert LocalColdStore.from_url(f"file://localhost{tmp_path}/x", Settings()).root == tmp_path / "x"


@pytest.mark.parametrize("url", ["file://relative/dir", "file:relative", "file:///tmp/x?mode=1", "s3://bucket",
                                 "file://host.example.com/tmp/x"])
def test_bad_file_urls_are_configuration_errors(url):
    with pytest.raises(ConfigurationError):
        LocalColdStore.from_url(url, Settings())


def test_put_leaves_one_private_file_and_no_temporary_one(tmp_path):
    store = LocalColdStore(tmp_path)
    store.put("t/u/2026-11-30.jsonl.gz", b"x")
    store.put("t/u/2026-11-30.jsonl.gz", b"y")
    assert files_under(tmp_path) == ["t", "t/u", "t/u/2026-11-30.jsonl.gz"]  # no "…~tmp" left
    assert stat.S_IMODE((tmp_path / "t/u/2026-11-30.jsonl.gz").stat().st_mode) == 0o600


def test_temporary_files_of_unfinished_puts_are_not_listed_but_are_erased(tmp_path):
    store = LocalColdStore(tmp_path)
    store.put("t/u/a", b"x")
    (tmp_path / "t/u/b~k3j2h1x9").write_bytes(b"half")  # what a crash in the middle of a put leaves
    assert store.list("") == ["t/u/a"]
    assert store.list("t/u/b") == [] and store.delete_prefix("t/u/b") == 0  # nothing to count, but erased
    assert files_under(tmp_path) == ["t", "t/u", "t/u/a"]
    (tmp_path / "t/u/c~k3j2h1x9").write_bytes(b"half")
    assert store.delete_prefix("t/") == 1 and files_under(tmp_path) == []


def test_delete_prefix_removes_emptied_directories_but_never_the_root(tmp_path):
    store = LocalColdStore(tmp_path / "root")
    for key in ("t1/u1/a", "t1/u1/deep/er/b", "t1/u2/c"):
        store.put(key, b"x")
    assert store.delete_prefix("t1/u1/") == 2
    assert files_under(tmp_path / "root") == ["t1", "t1/u2", "t1/u2/c"]
    assert store.delete_prefix("t1/") == 1
    assert files_under(tmp_path / "root") == [] and (tmp_path / "root").is_dir()


def test_a_key_cannot_be_both_an_object_and_a_directory(tmp_path):
    store = LocalColdStore(tmp_path)
    store.put("a/b", b"x")
    with pytest.raises(Conflict):
        store.put("a", b"y")  # "a" is a directory here
    with pytest.raises(Conflict):
        store.put("a/b/c", b"y")  # "a/b" is a file here
    assert store.list("") == ["a/b"] and store.get("a/b") == b"x"


def test_a_missing_root_is_transient(tmp_path):
    store = LocalColdStore(tmp_path / "gone")
    os.rmdir(tmp_path / "gone")  # e.g. an unmounted volume
    with pytest.raises(TransientError):
        store.ping()
    assert store.list("") == []
