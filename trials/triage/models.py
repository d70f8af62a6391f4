"""QC models (issue: failure triage). Imported by trials/models.py so they belong to the trials app."""
