"""Two sides reduced to figures: what a side is, its per-task cells, the statistics, validity and verdict."""
