from setuptools import find_packages, setup

setup(name="tf1-10-session-trainer", version="0.1", packages=find_packages())
