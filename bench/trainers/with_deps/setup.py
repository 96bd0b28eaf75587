from setuptools import find_packages, setup

# pandas is the runtime's; tabulate is not, so the install resolves it (as of the runtime's day, or
# today's index) and adds it.
setup(name="with-deps", version="0.1", packages=find_packages(), install_requires=["pandas", "tabulate"])
