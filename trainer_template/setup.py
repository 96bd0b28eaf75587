"""Packaging for the trainer: ``python -m build --sdist`` or any setuptools sdist build.

AI Platform Training, Vertex AI and aiptrain install this package on every replica and run
``python -m trainer.task``. TensorFlow is declared for completeness; runtime images (and
aiptrain's runtime environments, which install the other requirements on top) provide it.
"""

from setuptools import find_packages, setup

setup(
    name="trainer",
    version="0.1.0",
    description="Distributed TensorFlow 2 trainer for the 8x8 digits, following the AI Platform Training contract",
    packages=find_packages(include=["trainer", "trainer.*"]),
    python_requires=">=3.7",  # runtime 2.11 runs Python 3.7
    install_requires=[
        "tensorflow>=2.11",  # Keras 2 (runtime 2.11: TensorFlow 2.11.0) and Keras 3 (TensorFlow 2.16+)
        "cloudml-hypertune>=0.1.0.dev6",
    ],
    extras_require={
        # Only `python -m trainer.make_data` needs it (the digits ship inside scikit-learn).
        "data": ["scikit-learn>=1.0"],
    },
)
