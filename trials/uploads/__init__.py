"""Sending packs in: the upload form and API, the imports list, an import's progress (over trials/queue.py)."""
