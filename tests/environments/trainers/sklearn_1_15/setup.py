from setuptools import find_packages, setup

# The pins of a scikit-learn trainer written for runtime 1.15 (pandas 0.24's own metadata is
# legacy: uv refuses it, the runtime's pip installs it).
setup(name="sklearn-1-15-trainer", version="0.1", packages=find_packages(),
      install_requires=["pandas==0.24.2", "scikit-learn==0.20.2"])
