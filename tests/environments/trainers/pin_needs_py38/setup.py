from setuptools import find_packages, setup

# pandas 1.4.1 needs Python >= 3.8; runtime 1.15 runs Python 3.7, so the service failed this job.
setup(name="pin-needs-py38-trainer", version="0.1", packages=find_packages(), install_requires=["pandas==1.4.1"])
