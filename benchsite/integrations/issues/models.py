"""The forge issue of one confirmed change point on one watched repository."""
from django.db import models


class ForgeIssue(models.Model):
    """At most one per change point and watch (unique), so a task retried or delivered twice
    finds the issue it opened. `reported` is the ledger of what was sent, per channel."""

    change_point = models.ForeignKey("regressions.ChangePoint", on_delete=models.CASCADE, related_name="forge_issues")
    watch = models.ForeignKey("hooks.RepoWatch", on_delete=models.CASCADE, related_name="forge_issues")
    provider = models.CharField(max_length=10)  # github, gitlab
    number = models.PositiveIntegerField(null=True, blank=True, help_text="GitHub's issue number, GitLab's iid.")
    url = models.CharField(max_length=500, blank=True)
    state = models.CharField(max_length=10, default="", blank=True, help_text="open or closed as last sent; "
                             "empty until opened.")
    reported = models.JSONField(default=dict, blank=True, help_text="What was last sent, per channel.")
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["change_point", "watch"], name="forge_issue_once")]

    def __str__(self):
        where = f"#{self.number}" if self.number else "(not opened)"
        return f"{self.watch.repo_key}{where} for change point {self.change_point_id}"
