from setuptools import find_packages, setup

# As setup.py files of runtime 1.15 trainers pinned it: a TensorFlow patch other than the image's, which
# pip installed over it on the service (and which every replica then runs).
setup(name="tf1-estimator-trainer", version="0.1", packages=find_packages(), install_requires=["tensorflow==1.15.2"])
