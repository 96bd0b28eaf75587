"""What the command-line tests share: a tiny trainer package (no TensorFlow), and fake-gcs-server."""

from tests.fixtures.gcs import fake_gcs_server
from tests.fixtures.tiny_trainer import trainer

__all__ = ["fake_gcs_server", "trainer"]
