"""Tests of the local engine (aiptrain.runner) with real processes."""
