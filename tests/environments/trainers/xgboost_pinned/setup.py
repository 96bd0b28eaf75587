from setuptools import find_packages, setup

setup(name="xgboost-pinned-trainer", version="0.1", packages=find_packages(), install_requires=["xgboost==0.81"])
