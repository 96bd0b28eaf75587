from setuptools import setup

setup(name="aiptrain-ray-probe", version="1.0", packages=["aiptrain_ray_probe"])
