"""The simulator side: LIBERO scenes and their variants (scene), observations and frames, the task list."""
