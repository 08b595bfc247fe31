"""Files on disk: atomic writes, compressed inputs, strict YAML."""
