"""A trainer package that declares a dependency the runtime does not have:
mlengine installs packages without an index, so the job must fail with a
message naming tensorflow-datasets."""

from setuptools import find_packages, setup

setup(
    name="trainer",
    version="0.1.0",
    packages=find_packages(include=["trainer", "trainer.*"]),
    install_requires=["tensorflow-datasets~=3.1"],
)
