"""Tests of the local backend (aiptrain.backends.local), with real supervisors and replica processes."""
