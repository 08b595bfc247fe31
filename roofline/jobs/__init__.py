"""How a workflow stage runs as a job (``python -m roofline.jobs STAGE LOG ...``), and the code digests
that rerun it.
"""
