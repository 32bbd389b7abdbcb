"""What a person sees of the workspace (status, history, the dashboard), read from the files
the engine writes, never from its memory: read models that commands/ prints and web/ serves."""
