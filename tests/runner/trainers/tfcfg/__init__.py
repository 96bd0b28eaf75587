"""Small trainers the runner tests run as real replicas (no TensorFlow unless the module says so)."""
