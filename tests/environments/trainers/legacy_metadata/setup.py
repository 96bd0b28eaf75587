from setuptools import find_packages, setup

# python-networkdays 1.0.2 (2020-12-28) declares Requires-Python `>=3.`, which pip of its day read and
# uv does not.
setup(name="legacy-metadata-trainer", version="0.1", packages=find_packages(),
      install_requires=["python-networkdays==1.0.2"])
