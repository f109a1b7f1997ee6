# As ai-platform-samples' trainers declare it: cloudml-hypertune from PyPI.
from setuptools import find_packages, setup

setup(name="aip-hypertune", version="0.1", packages=find_packages(), install_requires=["cloudml-hypertune"])
