"""mlengine storage {mb, cp, ls, cat, rm} against mlengined's storage API."""

import os
import subprocess

from conftest import MLENGINE


def cat_bytes(cli, uri):
    proc = subprocess.run([MLENGINE, "storage", "cat", uri], env=cli.env, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_copy_list_cat_remove(cli, names, tmp_path, storage_api):
    b = names.bucket
    cli.ok("storage", "mb", f"gs://{b}")
    assert f"gs://{b}/" in cli.ok("storage", "ls").out.split()
    assert f"gs://{b}/" in cli.ok("storage", "ls", "gs://").out.split()  # as gsutil ls gs:// lists them

    small = tmp_path / "small.txt"
    small.write_text("hello storage\n")
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(3 * 1024 * 1024 + 17))  # > 1 MiB: streamed (no bar without a TTY)

    cli.ok("storage", "cp", str(small), f"gs://{b}/data/")            # into a "directory"
    cli.ok("storage", "cp", str(big), f"gs://{b}/data/renamed.bin")   # to an exact name
    assert cat_bytes(cli, f"gs://{b}/data/small.txt") == b"hello storage\n"
    assert cat_bytes(cli, f"gs://{b}/data/renamed.bin") == big.read_bytes()

    assert cli.ok("storage", "ls", f"gs://{b}").out.split() == [f"gs://{b}/data/"]
    assert sorted(cli.ok("storage", "ls", f"gs://{b}/data").out.split()) == [
        f"gs://{b}/data/renamed.bin", f"gs://{b}/data/small.txt"]
    long = cli.ok("storage", "ls", "-l", f"gs://{b}/data/").out
    assert str(big.stat().st_size) in long and "TOTAL: 2 objects" in long
    # --format, as gcloud storage ls takes it: resources with their url.
    listed = cli.ok("storage", "ls", f"gs://{b}/data/", "--format=json").json()
    assert sorted((o["url"], o["size"]) for o in listed) == [
        (f"gs://{b}/data/renamed.bin", str(big.stat().st_size)), (f"gs://{b}/data/small.txt", "14")], listed
    assert cli.ok("storage", "ls", f"gs://{b}", "--format=value(url,type)").out == f"gs://{b}/data/\tprefix\n"
    assert f"gs://{b}/" in cli.ok("storage", "ls", "--format=value(url)").out.split()

    out = tmp_path / "down"
    out.mkdir()
    cli.ok("storage", "cp", f"gs://{b}/data/renamed.bin", str(out))
    assert (out / "renamed.bin").read_bytes() == big.read_bytes()
    cli.ok("storage", "cp", f"gs://{b}/data/small.txt", str(out / "copy.txt"))
    assert (out / "copy.txt").read_text() == "hello storage\n"

    cli.ok("storage", "cp", f"gs://{b}/data/small.txt", f"gs://{b}/other/")
    assert cat_bytes(cli, f"gs://{b}/other/small.txt") == b"hello storage\n"

    cli.ok("storage", "rm", f"gs://{b}/data/small.txt")
    r = cli("storage", "cat", f"gs://{b}/data/small.txt")
    assert r.rc == 1 and "NOT_FOUND" in r.err
    r = cli("storage", "ls", f"gs://{b}/nothing-here")
    assert r.rc == 1 and "matched no objects" in r.err


def test_recursive_copy_both_ways(cli, names, tmp_path, storage_api):
    b = names.bucket
    src = tmp_path / "dataset"
    (src / "train").mkdir(parents=True)
    (src / "train" / "a.csv").write_text("1,2\n")
    (src / "test.csv").write_text("3,4\n")
    cli.ok("storage", "cp", "-r", str(src), f"gs://{b}/")
    listing = sorted(cli.ok("storage", "ls", "-r", f"gs://{b}/dataset").out.split())
    assert listing == [f"gs://{b}/dataset/test.csv", f"gs://{b}/dataset/train/a.csv"]
    r = cli("storage", "cp", str(src), f"gs://{b}/")
    assert r.rc == 1 and "-r" in r.err

    dest = tmp_path / "restored"
    cli.ok("storage", "cp", "-r", f"gs://{b}/dataset", str(dest))
    assert (dest / "train" / "a.csv").read_text() == "1,2\n"
    assert (dest / "test.csv").read_text() == "3,4\n"

    cli.ok("storage", "rm", "-r", f"gs://{b}/dataset")
    r = cli("storage", "ls", f"gs://{b}/dataset")
    assert r.rc == 1


def test_usage_errors(cli):
    r = cli("storage", "cp", "a", "b")
    assert r.rc == 1 and "gs://" in r.err
    r = cli("storage", "ls", "s3://x")
    assert r.rc == 1
