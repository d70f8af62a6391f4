"""The trial viewer: its pages (pages.py) and its API (api.py), over the reads of trials/reading/."""
