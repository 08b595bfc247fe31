"""Verdicts: each launch against its roofs, kernel aggregates, the instruction roofline."""
