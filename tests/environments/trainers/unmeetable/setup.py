from setuptools import find_packages, setup

setup(name="unmeetable-trainer", version="0.1", packages=find_packages(), install_requires=["scikit-learn==0.0.99"])
