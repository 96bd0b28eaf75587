"""Tests of the local engine (aiptrain.backends.local and aiptrain.replicas) with real processes."""
