"""What is measured: the recipe table from raw ncu metrics to canonical quantities, compute paths, SI
units, the capture's metric plan.
"""
