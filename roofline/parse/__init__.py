"""One input (an ``.ncu-rep`` report, an ncu CSV export, a what-if sheet) to the counters table: the
facade, the derivation of every quantity from raw metrics, plausibility checks, kernel names.
"""
