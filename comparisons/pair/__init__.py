"""The comparison of two sides: its page, JSON, charts, headline figures and saved comparisons."""
