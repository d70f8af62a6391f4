"""Comparisons of many sides: the N-sides grid and the trend over time, their pages, JSON and charts."""
