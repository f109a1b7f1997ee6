"""The MNIST walkthrough's trainer package (PyTorch, 8x8 digits).

torch, numpy and scikit-learn come from the runtime (the system Python of
the `pytorch-1.13-cpu` runtime), so nothing is listed in install_requires.
"""

from setuptools import find_packages, setup

setup(
    name="trainer",
    version="0.1.0",
    description="mlengine MNIST walkthrough: a small PyTorch digits classifier",
    packages=find_packages(include=["trainer", "trainer.*"]),
    install_requires=[],
)
