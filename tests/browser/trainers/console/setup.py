from setuptools import setup

setup(name="trainer", version="0.0.0", packages=["trainer"])
