"""Web-queue tasks of the regressions app (thin; logic in the services)."""
