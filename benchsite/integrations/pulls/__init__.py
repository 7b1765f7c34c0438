"""Pull-request checks: each PR's head measured against its merge base, reported back as a
GitHub check run (or a commit status and a comment) and a GitLab merge-request note.

payloads.py reads the events (pure), service.py acts on them, comparison.py judges head against
base (pure), results.py gathers the finished runs, report.py and github_app.py talk back."""
