"""A comparison computed once and stored: `compute`, the cached rows, recovery of stranded ones, the event."""
