"""Roofs per device: peaks read from the report, a cited datasheet catalog, and the selection and
cross-check between them.
"""

DEFAULT_POLICY = ("report", "datasheet")  # ceiling sources in order of preference, unless a config says otherwise
CROSS_CHECK_MARGIN = 0.25  # two sources of one roof that differ by more than this fraction are a warning
