"""A trainer that does no training: it measures what running a job costs beyond the trainer."""
