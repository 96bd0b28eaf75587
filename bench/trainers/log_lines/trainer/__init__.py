"""A trainer that prints time-stamped lines, for measuring how fast logs reach the follower."""
