"""What runs on a GPU host: the engine process, probes, analysis. Plain Python, no Django."""
