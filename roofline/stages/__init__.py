"""One thin entry per workflow stage, named as its rule: arguments in, tables read, the core called, tables written."""
