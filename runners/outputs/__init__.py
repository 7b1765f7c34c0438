"""What a job hands back besides its measurements: its artifacts (files and inline content,
artifacts.py) and the tail of its log while it runs (livelog.py). Plain Python, no runners imports."""
