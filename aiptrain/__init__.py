"""aiptrain: AI Platform Training jobs, locally, on Vertex AI, or on any ml v1 endpoint."""

__version__ = "0.1.0"
