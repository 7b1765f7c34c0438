"""Pull-request checks: each PR's head measured against its merge base, reported back as a
GitHub check run (or a commit status and a comment) and a GitLab merge-request note.

events.py holds what an event says (each forge reads its own: github/payloads.py,
gitlab/payloads.py), service.py acts on it, comparison.py judges head against base (pure),
results.py gathers the finished runs, report.py talks back through the PR's forge (forges.py)."""
