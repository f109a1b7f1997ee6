import os
import pathlib

import pytest

from mlengine import gcs


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv("MLENGINE_GCS_ROOT", str(tmp_path))
    return tmp_path


def test_local_path_translates_object(root):
    assert gcs.local_path("gs://bucket/a/b/c.txt") == os.path.join(str(root), "bucket", "a/b/c.txt")


def test_local_path_bucket_only(root):
    assert gcs.local_path("gs://bucket") == os.path.join(str(root), "bucket")
    assert gcs.local_path("gs://bucket/") == os.path.join(str(root), "bucket")


def test_local_path_keeps_trailing_slash(root):
    assert gcs.local_path("gs://b/dir/") == os.path.join(str(root), "b", "dir/")


def test_local_paths_are_returned_unchanged(root, monkeypatch):
    assert gcs.local_path("/abs/file.npz") == "/abs/file.npz"
    assert gcs.local_path("rel/dir") == "rel/dir"
    assert gcs.local_path(pathlib.Path("/x/y")) == "/x/y"
    monkeypatch.delenv("MLENGINE_GCS_ROOT")
    assert gcs.local_path("/abs/file.npz") == "/abs/file.npz"


@pytest.mark.parametrize("uri", [
    "gs://b/../etc/passwd", "gs://b/a/../../x", "gs://b/..", "gs://../x", "gs://./x",
])
def test_dotdot_segments_are_refused(root, uri):
    with pytest.raises(ValueError):
        gcs.local_path(uri)


def test_dots_inside_names_are_fine(root):
    assert gcs.local_path("gs://b/a..b/.hidden") == os.path.join(str(root), "b", "a..b/.hidden")


@pytest.mark.parametrize("uri", ["gs://", "gs:///object", "gs:///"])
def test_empty_bucket_is_refused(root, uri):
    with pytest.raises(ValueError, match="bucket"):
        gcs.local_path(uri)


@pytest.mark.parametrize("uri", ["gs://b/a\\b", "gs://b/a\x00b"])
def test_backslash_and_nul_are_refused(root, uri):
    with pytest.raises(ValueError):
        gcs.local_path(uri)


def test_other_schemes_are_refused(root):
    with pytest.raises(ValueError, match="s3://"):
        gcs.local_path("s3://bucket/key")


def test_gs_uri_without_root_explains(monkeypatch):
    monkeypatch.delenv("MLENGINE_GCS_ROOT", raising=False)
    with pytest.raises(gcs.GcsRootNotSetError) as info:
        gcs.local_path("gs://bucket/x")
    message = str(info.value)
    assert "only available inside mlengine replicas" in message
    assert "MLENGINE_GCS_ROOT" in message
    assert isinstance(info.value, RuntimeError)


def test_empty_root_counts_as_unset(monkeypatch):
    monkeypatch.setenv("MLENGINE_GCS_ROOT", "")
    with pytest.raises(gcs.GcsRootNotSetError):
        gcs.open("gs://bucket/x", "w")


def test_split_uri():
    assert gcs.split_uri("gs://b/x/y") == ("b", "x/y")
    assert gcs.split_uri("gs://b") == ("b", "")
    with pytest.raises(ValueError):
        gcs.split_uri("/local")


def test_open_write_creates_parents_and_reads_back(root):
    with gcs.open("gs://bucket/deep/er/file.txt", "w") as f:
        f.write("hello\n")
    assert (root / "bucket" / "deep" / "er" / "file.txt").read_text() == "hello\n"
    with gcs.open("gs://bucket/deep/er/file.txt") as f:
        assert f.read() == "hello\n"


def test_open_binary_and_append(root):
    with gcs.open("gs://b/x.bin", "wb") as f:
        f.write(b"\x00\x01")
    with gcs.open("gs://b/x.bin", "ab") as f:
        f.write(b"\x02")
    with gcs.open("gs://b/x.bin", "rb") as f:
        assert f.read() == b"\x00\x01\x02"


def test_open_exclusive_creates_parents(root):
    with gcs.open("gs://b/new/dir/x", "x") as f:
        f.write("1")
    with pytest.raises(FileExistsError):
        gcs.open("gs://b/new/dir/x", "x")


def test_open_read_missing_raises(root):
    with pytest.raises(FileNotFoundError):
        gcs.open("gs://b/missing.txt")
    assert not (root / "b").exists()  # reading creates nothing


def test_open_local_path(tmp_path, monkeypatch):
    monkeypatch.delenv("MLENGINE_GCS_ROOT", raising=False)
    target = tmp_path / "sub" / "f.txt"
    with gcs.open(str(target), "w") as f:
        f.write("x")
    assert target.read_text() == "x"


def test_exists_isdir_listdir_makedirs(root):
    assert not gcs.exists("gs://b/d")
    gcs.makedirs("gs://b/d/e")
    gcs.makedirs("gs://b/d/e")  # exist_ok by default
    with pytest.raises(FileExistsError):
        gcs.makedirs("gs://b/d/e", exist_ok=False)
    with gcs.open("gs://b/d/z.txt", "w") as f:
        f.write("z")
    with gcs.open("gs://b/d/a.txt", "w") as f:
        f.write("a")
    assert gcs.exists("gs://b/d")
    assert gcs.exists("gs://b/d/z.txt")
    assert gcs.isdir("gs://b/d")
    assert gcs.isdir("gs://b/d/e")
    assert not gcs.isdir("gs://b/d/z.txt")
    assert gcs.listdir("gs://b/d") == ["a.txt", "e", "z.txt"]
    assert gcs.listdir("gs://b") == ["d"]


def test_is_gcs_uri():
    assert gcs.is_gcs_uri("gs://b/x")
    assert not gcs.is_gcs_uri("/gs://")
    assert not gcs.is_gcs_uri(None)
