from setuptools import find_packages, setup

# A TensorFlow 1 trainer submitted with --runtime-version 2.1: pip installed the pinned 1.15 over the
# image's 2.1 on the service, and that is what it ran.
setup(name="era-2-1-trainer", version="0.1", packages=find_packages(), install_requires=["tensorflow==1.15.0"])
