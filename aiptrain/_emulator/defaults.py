"""Where `aiptrain local serve` listens unless told otherwise, and so where its clients look.

A module of its own, importing nothing, because the command line's options and help name these
values when it starts, before any of the emulator is loaded.
"""

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
