"""Asking the trials query language: suggestions as a query is typed, and saved queries."""
