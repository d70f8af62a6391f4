"""Shared helpers every app uses: ids, locks, broker markers, errors, pagination, the schema, roles."""
