"""`aiptrain local serve`: ml v1, Vertex AI customJobs and logging v2 over the local engine."""
