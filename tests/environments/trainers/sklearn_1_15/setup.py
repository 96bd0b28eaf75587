from setuptools import find_packages, setup

# The requirements of a scikit-learn trainer written for runtime 1.15: the image's pandas pinned (met:
# already there), an older scikit-learn pinned (installed over the image's), tabulate left open (the
# release of the runtime's day, 0.8.7, not today's).
setup(name="sklearn-1-15-trainer", version="0.1", packages=find_packages(),
      install_requires=["pandas==0.24.2", "scikit-learn==0.20.2", "tabulate"])
