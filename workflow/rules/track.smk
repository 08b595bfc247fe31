# nightly tracking rules (see roofline/track.py)
