"""``gs://`` paths inside an mlengine replica.

mlengined's object store shows each bucket ``B`` as the directory
``$MLENGINE_GCS_ROOT/B`` (docs/runtime-contract.md, "Buckets"), so the
object ``path`` of bucket ``B`` is the file ``$MLENGINE_GCS_ROOT/B/path``.
The functions here accept both ``gs://`` URIs and ordinary local paths, so a
trainer works the same inside a replica and on a workstation.
"""

import builtins
import os

__all__ = [
    "GcsRootNotSetError",
    "ROOT_ENV",
    "exists",
    "is_gcs_uri",
    "isdir",
    "listdir",
    "local_path",
    "makedirs",
    "open",
    "split_uri",
]

ROOT_ENV = "MLENGINE_GCS_ROOT"
_SCHEME = "gs://"


class GcsRootNotSetError(RuntimeError):
    """A gs:// URI was used where MLENGINE_GCS_ROOT is not set."""


def is_gcs_uri(path):
    """True when ``path`` is a ``gs://`` URI."""
    return isinstance(path, str) and path.startswith(_SCHEME)


def split_uri(uri):
    """Splits ``gs://BUCKET/object`` into ``(BUCKET, object)``.

    ``object`` may be empty (the bucket itself) and keeps a trailing ``/``.
    Raises ValueError for an empty bucket name or for ``..`` segments, NUL
    bytes or backslashes, which the object store refuses too.
    """
    if not is_gcs_uri(uri):
        raise ValueError("not a gs:// URI: %r" % (uri,))
    rest = uri[len(_SCHEME):]
    bucket, _, name = rest.partition("/")
    if not bucket:
        raise ValueError("gs:// URI without a bucket name: %r" % (uri,))
    if "\x00" in rest or "\\" in rest:
        raise ValueError(
            "gs:// URI with a NUL byte or backslash is not allowed: %r" % (uri,))
    if bucket in (".", ".."):
        raise ValueError("invalid bucket name in %r" % (uri,))
    if any(segment == ".." for segment in name.split("/")):
        raise ValueError("'..' segments are not allowed in gs:// URIs: %r" % (uri,))
    return bucket, name


def _root():
    root = os.environ.get(ROOT_ENV, "")
    if not root:
        raise GcsRootNotSetError(
            "gs:// paths are only available inside mlengine replicas, where "
            "%s names the local directory that holds the buckets; set %s "
            "(each bucket B is then the directory $%s/B) to use them here"
            % (ROOT_ENV, ROOT_ENV, ROOT_ENV))
    return root


def local_path(uri):
    """The local file for ``uri``.

    ``gs://BUCKET/path`` becomes ``$MLENGINE_GCS_ROOT/BUCKET/path``; a local
    path (no ``scheme://``) is returned unchanged. Other URI schemes raise
    ValueError; a gs:// URI without MLENGINE_GCS_ROOT raises
    GcsRootNotSetError.
    """
    path = os.fspath(uri)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if is_gcs_uri(path):
        bucket, name = split_uri(path)
        root = _root()
        if not name:
            return os.path.join(root, bucket)
        return os.path.join(root, bucket, name)
    scheme, sep, _ = path.partition("://")
    if sep and scheme and "/" not in scheme:
        raise ValueError(
            "unsupported URI scheme %r in %r: only gs:// URIs and local paths "
            "are accepted" % (scheme + "://", path))
    return path


def _writing(mode):
    return any(c in mode for c in "wax")


def open(uri, mode="r", *args, **kwargs):  # pylint: disable=redefined-builtin
    """Opens ``uri`` (gs:// or local) like the built-in ``open``.

    When writing (modes with ``w``, ``a`` or ``x``), missing parent
    directories are created first.
    """
    path = local_path(uri)
    if _writing(mode):
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
    return builtins.open(path, mode, *args, **kwargs)


def exists(uri):
    """True when the object, or a directory (prefix), exists."""
    return os.path.exists(local_path(uri))


def isdir(uri):
    """True when ``uri`` is a directory (a prefix holding objects)."""
    return os.path.isdir(local_path(uri))


def makedirs(uri, exist_ok=True):
    """Creates the directory ``uri`` and its parents."""
    os.makedirs(local_path(uri), exist_ok=exist_ok)


def listdir(uri):
    """The sorted entry names directly under ``uri``."""
    return sorted(os.listdir(local_path(uri)))
