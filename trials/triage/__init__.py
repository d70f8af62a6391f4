"""Failure triage into Agent QC: feedback forms, QC scenarios, blockers and waivers, roles."""
