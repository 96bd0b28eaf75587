"""Tests of the local backend (aiptrain._backends.local), with real supervisors and replica processes."""
