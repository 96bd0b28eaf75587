"""Exits at once; only its dependencies matter (they are installed in PREPARING)."""

import tabulate

print("with_deps trainer:", tabulate.__version__)
