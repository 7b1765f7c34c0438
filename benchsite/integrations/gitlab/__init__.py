"""GitLab: its deliveries, commit statuses, merge-request notes and issues. The rest of the
service reaches it through forges.py (forge.py here is its entry)."""
