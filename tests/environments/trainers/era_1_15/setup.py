from setuptools import find_packages, setup

# A 2020 trainer: a TensorFlow patch pinned, everything else left open (today's tensorflow-hub needs
# TensorFlow 2 and protobuf 4; the release of the runtime's day does not).
setup(name="era-1-15-trainer", version="0.1", packages=find_packages(),
      install_requires=["tensorflow==1.15.2", "tensorflow-hub", "tabulate"])
