"""Altair charts (rooflines, the instruction roofline, compare trajectories), used by the pages and
``roofline.plot``.
"""
