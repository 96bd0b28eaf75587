from setuptools import find_packages, setup

# pandas and scikit-learn come with the runtime; tabulate does not, so only this file brings it.
setup(
    name="sklearn-deps-trainer",
    version="0.1",
    packages=find_packages(),
    install_requires=["pandas", "scikit-learn>=1.0", "tabulate==0.9.0"],
)
