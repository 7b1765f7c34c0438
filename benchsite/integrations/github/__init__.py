"""GitHub: its deliveries, App, check runs, commit statuses, comments and issues. The rest of the
service reaches it through forges.py (forge.py here is its entry)."""
