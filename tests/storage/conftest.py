"""Fixtures of the storage tests: a real fake-gcs-server and a fault-injecting proxy in front of it.

See tests/fixtures/gcs.py for what they provide. Other suites get them the same way:
    from tests.fixtures.gcs import fake_gcs, fake_gcs_server, faulty_proxy
"""

from tests.fixtures.gcs import fake_gcs, fake_gcs_server, faulty_proxy

__all__ = ["fake_gcs", "fake_gcs_server", "faulty_proxy"]
