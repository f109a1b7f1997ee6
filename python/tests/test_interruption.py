import os
import signal

import pytest

from mlengine import interruption


@pytest.fixture
def job(tmp_path, monkeypatch):
    """A replica's environment: buckets under tmp_path, jobDir gs://b/run."""
    monkeypatch.setenv("MLENGINE_GCS_ROOT", str(tmp_path))
    monkeypatch.setenv("AIP_CHECKPOINT_DIR", "gs://b/run/checkpoints/")
    monkeypatch.setenv("MLENGINE_ATTEMPT", "1")
    return tmp_path


def test_the_attempt_and_whether_it_resumes():
    assert interruption.attempt({}) == 1
    assert not interruption.resumed({})
    assert interruption.attempt({"MLENGINE_ATTEMPT": "3"}) == 3
    assert interruption.resumed({"MLENGINE_ATTEMPT": "2"})
    assert interruption.attempt({"MLENGINE_ATTEMPT": "junk"}) == 1


def test_the_checkpoint_dir_is_the_buckets_local_path(job):
    assert interruption.checkpoint_dir() == os.path.join(str(job), "b", "run/checkpoints/")
    assert interruption.checkpoint_dir({}) is None
    assert interruption.checkpoint_dir({"AIP_CHECKPOINT_DIR": "/local/ckpt"}) == "/local/ckpt"


def test_a_saved_state_is_what_the_next_attempt_loads(job, monkeypatch):
    assert interruption.load() is None
    path = interruption.save({"step": 7, "w": [1.0, 2.0]})
    assert path == os.path.join(str(job), "b", "run/checkpoints/", "checkpoint")
    interruption.save({"step": 9, "w": [3.0]})
    monkeypatch.setenv("MLENGINE_ATTEMPT", "2")
    assert interruption.load() == {"step": 9, "w": [3.0]}
    assert [n for n in os.listdir(os.path.dirname(path)) if n.startswith(".")] == [], "no temporary file left"
    mask = os.umask(0)
    os.umask(mask)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~mask, "as open() makes it: the next attempt's uid reads it"


def test_without_a_job_dir_save_says_how_to_get_one(job, monkeypatch):
    monkeypatch.delenv("AIP_CHECKPOINT_DIR")
    assert interruption.load() is None
    with pytest.raises(interruption.NoCheckpointDirError, match="--job-dir"):
        interruption.save({"step": 1})


def test_names_are_file_names(job):
    for bad in ("", "../x", "a/b", ".."):
        with pytest.raises(ValueError):
            interruption.save(1, name=bad)


def test_sigterm_sets_the_notice_instead_of_ending_the_process():
    before = signal.getsignal(signal.SIGTERM)
    try:
        notice = interruption.install()
        assert not notice.requested
        os.kill(os.getpid(), signal.SIGTERM)
        assert notice.wait(5)
        assert notice.requested
        assert notice.signal == signal.SIGTERM
    finally:
        signal.signal(signal.SIGTERM, before)
