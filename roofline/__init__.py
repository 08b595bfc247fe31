"""Hierarchical roofline analysis of Nsight Compute profiles."""

__version__ = "0.1.0"
