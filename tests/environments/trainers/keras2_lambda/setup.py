from setuptools import find_packages, setup

setup(name="keras2-lambda-trainer", version="0.1", packages=find_packages())
