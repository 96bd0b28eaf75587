"""Small programs the rows run as fresh processes (each is one side of a comparison)."""
