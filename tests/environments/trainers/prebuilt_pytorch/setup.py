from setuptools import find_packages, setup

# As the PyTorch samples' packages were: the image brings torch; the package adds what it lacks.
setup(name="trainer", version="0.1", packages=find_packages(), install_requires=["tqdm"])
