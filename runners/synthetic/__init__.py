"""Synthetic models: the tiny CPU test model and random-weight models of real shape."""
