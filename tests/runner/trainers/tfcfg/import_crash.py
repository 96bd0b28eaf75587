"""A trainer written for an older Python: it fails on import, on every replica, every time."""

import collections

Mapping = collections.Mapping  # type: ignore[attr-defined]  # removed in Python 3.10
