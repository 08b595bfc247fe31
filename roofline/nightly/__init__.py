"""Nightly tracking: the history store, the decision rule over each kernel's series, its stored state,
regressions.json.
"""
