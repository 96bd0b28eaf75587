from setuptools import find_packages, setup

setup(name="compat-v1-trainer", version="0.1", packages=find_packages())
