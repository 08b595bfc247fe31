# Capture: runs apps with a `command:` under ncu (the only rule that needs a GPU).
# Filled in by the capture issue; apps given as reports never schedule it.
