"""A tuning test trainer without TensorFlow: its metric is a known function of its arguments."""
