from setuptools import find_packages, setup

# As setup.py files of runtime 1.15 trainers pinned it: the runtime provides TensorFlow, so the pin
# must neither pull a second copy nor fail.
setup(name="tf1-estimator-trainer", version="0.1", packages=find_packages(), install_requires=["tensorflow==1.15.4"])
