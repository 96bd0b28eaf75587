"""Benchmarks of aiptrain against anchors measured in the same run; `make bench` writes docs/benchmarks.md.

Every figure is compared with an anchor (the plain tool, or what gcloud did) timed on the same
machine, interleaved with the subject, so a busy machine slows both sides alike.
"""
