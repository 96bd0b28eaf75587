from setuptools import find_packages, setup

# Open on purpose: pip resolves it as of the job's day (tabulate 0.8.7 for runtime 1.15's).
setup(name="py2-only-trainer", version="0.1", packages=find_packages(), install_requires=["tabulate"])
