"""One reader per input format; each returns the raw metrics of every launch and where each came from."""
