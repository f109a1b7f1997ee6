"""Being interrupted, for trainers: the preemption notice, the attempt, the
checkpoint to resume from (docs/interruptions.md).

mlengine stops a replica it preempts (for a job of higher priority) as it
stops one that is cancelled: SIGTERM, then its grace period (10 s by
default), then SIGKILL. The job is then queued again and runs, from the
start of its program, as its next attempt: the same job id, job dir and
environment, plus ``MLENGINE_ATTEMPT`` (1, 2, ...) and, when the job has a
``jobDir``, Vertex AI's ``AIP_CHECKPOINT_DIR`` (``<jobDir>/checkpoints/``,
the same in every attempt). An attempt lost to the infrastructure and
retried starts the same way.

A trainer that saves its state when told, and loads it when it starts,
loses at most the work since its last save::

    import sys
    from mlengine import interruption

    notice = interruption.install()          # SIGTERM now sets notice.requested
    state = interruption.load() or {"step": 0, "weights": init()}
    while state["step"] < steps:
        state["weights"] = train_one_step(state["weights"])
        state["step"] += 1
        if notice.requested or state["step"] % 100 == 0:
            interruption.save(state)         # atomic: a reader sees the old or the new
        if notice.requested:
            sys.exit(0)                      # mlengine queues the job again

Without ``jobDir`` there is no checkpoint directory: ``save`` raises
NoCheckpointDirError and ``load`` returns None.
"""
import os
import pickle
import signal
import tempfile
import threading

from mlengine import gcs

ATTEMPT_ENV = "MLENGINE_ATTEMPT"
CHECKPOINT_ENV = "AIP_CHECKPOINT_DIR"


class NoCheckpointDirError(RuntimeError):
    """The job has no jobDir, so it has no checkpoint directory."""


def attempt(environ=None):
    """This run's attempt number: 1 for the first, 2 after one interruption..."""
    env = os.environ if environ is None else environ
    try:
        return max(1, int(env.get(ATTEMPT_ENV, "1")))
    except ValueError:
        return 1


def resumed(environ=None):
    """True in every attempt after the first."""
    return attempt(environ) > 1


def checkpoint_dir(environ=None):
    """The local directory of the job's checkpoints (``AIP_CHECKPOINT_DIR``,
    a gs:// URI, as a path under ``$MLENGINE_GCS_ROOT``), or None when the
    job has no jobDir."""
    env = os.environ if environ is None else environ
    uri = env.get(CHECKPOINT_ENV, "")
    if not uri:
        return None
    if gcs.is_gcs_uri(uri):
        bucket, name = gcs.split_uri(uri)
        root = env.get(gcs.ROOT_ENV, "")
        if not root:
            return gcs.local_path(uri)  # raises GcsRootNotSetError, saying why
        return os.path.join(root, bucket, name)
    return uri


class Notice:
    """Whether mlengine asked this replica to stop (``requested``), and a way
    to wait for it."""

    def __init__(self):
        self._event = threading.Event()
        self.signal = None  # the signal that asked, once one did

    @property
    def requested(self):
        return self._event.is_set()

    def wait(self, timeout=None):
        """Blocks until asked to stop, or `timeout` seconds; True if asked."""
        return self._event.wait(timeout)

    def _set(self, signum, _frame=None):
        self.signal = signum
        self._event.set()


def install(signals=(signal.SIGTERM,)):
    """Handles `signals` (SIGTERM: what mlengine sends first) by setting the
    returned Notice's ``requested``, instead of ending the process at once:
    the trainer then has its grace period to save. Call it from the main
    thread (Python's rule for signal handlers)."""
    notice = Notice()
    for s in signals:
        signal.signal(s, notice._set)
    return notice


def _path(name, environ):
    directory = checkpoint_dir(environ)
    if directory is None:
        raise NoCheckpointDirError(
            "this job has no checkpoint directory: submit it with a job dir "
            "(--job-dir gs://BUCKET/PATH, trainingInput.jobDir) and "
            "AIP_CHECKPOINT_DIR is <jobDir>/checkpoints/ in every attempt")
    if not name or "/" in name or name in (".", ".."):
        raise ValueError("a checkpoint name is a file name, not %r" % (name,))
    return directory, os.path.join(directory, name)


def save(state, name="checkpoint", environ=None):
    """Pickles `state` to the checkpoint directory, atomically (a reader,
    or the next attempt, finds the previous checkpoint or this one, never
    half of one). Returns the file's path."""
    directory, path = _path(name, environ)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + name + ".", dir=directory)
    try:
        # As open() would make it (mkstemp's is 0600): in a bucket, the next
        # attempt runs as another uid and must read and replace it.
        mask = os.umask(0)
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)
        with os.fdopen(fd, "wb") as f:
            pickle.dump(state, f, protocol=pickle.HIGHEST_PROTOCOL)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def load(name="checkpoint", environ=None):
    """The state the last ``save`` wrote (of any attempt), or None when none
    was saved or the job has no checkpoint directory."""
    if checkpoint_dir(environ) is None:
        return None
    _, path = _path(name, environ)
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except FileNotFoundError:
        return None
