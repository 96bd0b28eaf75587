"""aiptrain: AI Platform Training jobs, locally, on Vertex AI, or on any ml v1 endpoint.

The folders below are layers (ARCHITECTURE.md); each folder's docstring says what it may import.
The loose modules here (`errors`, `paths`, `cache_eviction`) import nothing of aiptrain but
`errors`, so every layer may use them.
"""

__version__ = "0.1.0"
