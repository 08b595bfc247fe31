"""Blocks of the report's pages (:mod:`roofline.pages.report` assembles them and writes the files).

:mod:`~roofline.pages.markup` escapes text and JSON for HTML, :mod:`~roofline.pages.glance` writes
the words a performance engineer reads first (which kernels, against which roof, what reaching it
would save) and ncu's own findings beside our verdict.
"""
