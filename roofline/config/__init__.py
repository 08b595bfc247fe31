"""The workflow's config: the pydantic model, the config against the working directory, input patterns."""
