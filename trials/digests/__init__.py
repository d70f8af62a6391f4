"""Text digests: a trial, a failure cluster or a comparison as bounded, redacted Markdown (issue 42)."""
