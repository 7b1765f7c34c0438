"""Repository watches, the webhook deliveries they received, and API tokens (hashed)."""
import re

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models

from benchsite.bench.domain.repos import RepoURLError, repo_key, repo_name

from .pulls.settings import PullSettings, pull_settings
from .repos import branch_matches

ENV_NAME_VALIDATOR = RegexValidator(r"^[A-Z_][A-Z0-9_]{0,99}$", "An environment variable name: A-Z, 0-9 and '_'.")
MAX_BRANCH_PATTERNS = 50
_PATTERN = re.compile(r"^[A-Za-z0-9._/*?\[\]!+-]{1,250}$")


class RepoWatch(models.Model):
    """A repository whose pushes on some branches run some benchmarks.

    The secret is never stored: `secret_env` names the environment variable of the web process
    that holds it. One watch per repository, so a repository has one secret."""

    repo_url = models.CharField(max_length=500, help_text="As written by its owner: https, ssh or .git form.")
    repo_key = models.CharField(max_length=300, unique=True, editable=False,
                                help_text="Canonical host/owner/name: every URL form of a repository gives the same.")
    branches = models.JSONField(default=list, help_text='fnmatch patterns, e.g. ["main", "perf/*"].')
    benchmarks = models.ManyToManyField("bench.Benchmark", related_name="watches")
    secret_env = models.CharField(max_length=100, validators=[ENV_NAME_VALIDATOR],
                                  help_text="Name of the environment variable holding the webhook secret.")
    issues = models.BooleanField(default=False, help_text="Open a forge issue for each confirmed regression "
                                 "of its benchmarks (docs/forge-issues.md).")
    pull_requests = models.JSONField(
        default=dict, blank=True,
        help_text='Pull-request checks: {"drafts": false, "label": null, "starts_per_side": 2, "max_starts_per_side": null, '
                  '"comment": false}; '
                  'false turns them off.')
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["repo_key"]

    def __str__(self):
        return self.repo_key

    @property
    def repo_name(self) -> str:
        """The key as the owner's URL spells it, for pages: lookups go by the lowercase key."""
        try:
            return repo_name(self.repo_url)
        except RepoURLError:
            return self.repo_key

    def clean(self):
        try:
            pull_settings(self.pull_requests)
        except ValueError as exc:
            raise ValidationError({"pull_requests": str(exc)}) from None
        try:
            self.repo_key = repo_key(self.repo_url)
        except RepoURLError as exc:
            raise ValidationError({"repo_url": str(exc)}) from None
        from .issues.forge import issues_refusal  # here: the forges' code imports these models

        refusal = issues_refusal(self.repo_key) if self.issues else ""
        if refusal:  # the admin refuses what bench_apply refuses
            raise ValidationError({"issues": refusal})
        if not isinstance(self.branches, list) or not self.branches or len(self.branches) > MAX_BRANCH_PATTERNS:
            raise ValidationError({"branches": f"a list of 1 to {MAX_BRANCH_PATTERNS} branch patterns"})
        bad = [p for p in self.branches if not isinstance(p, str) or not _PATTERN.match(p)]
        if bad:
            raise ValidationError({"branches": f"invalid branch patterns {bad}"})

    def save(self, *args, **kwargs):
        self.repo_key = repo_key(self.repo_url)
        super().save(*args, **kwargs)

    def branch_matches(self, branch: str) -> bool:
        return branch_matches(branch, self.branches)

    @property
    def pr_settings(self) -> PullSettings | None:
        """The pull-request settings with their defaults; None when PR checks are off."""
        return pull_settings(self.pull_requests)


class WebhookDelivery(models.Model):
    """One request to a webhook endpoint and our answer: what came, what it queued, why."""

    class Provider(models.TextChoices):
        GITHUB = "github", "GitHub"
        GITLAB = "gitlab", "GitLab"

    provider = models.CharField(max_length=10, choices=Provider.choices)
    delivery_id = models.CharField(max_length=100, blank=True, help_text="X-GitHub-Delivery / X-Gitlab-Event-UUID.")
    accepted = models.BooleanField(default=False, help_text="Verified and acted on; repeats of its id are duplicates.")
    event = models.CharField(max_length=100, blank=True)
    watch = models.ForeignKey(RepoWatch, on_delete=models.SET_NULL, null=True, blank=True, related_name="deliveries")
    repo_key = models.CharField(max_length=300, blank=True, db_index=True)
    branch = models.CharField(max_length=250, blank=True)
    commit = models.CharField(max_length=64, blank=True)
    headers = models.JSONField(default=dict, blank=True, help_text="Without secrets or signatures.")
    body = models.TextField(blank=True)
    body_truncated = models.BooleanField(default=False)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    answer = models.TextField(blank=True)
    runs = models.ManyToManyField("bench.Run", blank=True, related_name="webhook_deliveries")
    received_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-received_at", "-id"]
        verbose_name_plural = "webhook deliveries"
        constraints = [
            # Refused attempts are kept too; only an accepted delivery makes its id a duplicate.
            models.UniqueConstraint(
                fields=["provider", "delivery_id"],
                condition=models.Q(accepted=True) & ~models.Q(delivery_id=""),
                name="webhook_delivery_accepted_once",
            ),
        ]
        indexes = [models.Index(fields=["repo_key", "branch"], name="webhook_delivery_branch")]

    def __str__(self):
        return f"{self.provider} {self.event} {self.delivery_id or self.pk} -> {self.status_code}"


class ApiToken(models.Model):
    """A bearer token for the JSON API. Only its sha256 is stored; the token is shown once."""

    name = models.CharField(max_length=100)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    token_sha256 = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=12, editable=False, help_text="The token's first characters, to recognise it.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked = models.BooleanField(default=False)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.name} ({self.prefix}…){' revoked' if self.revoked else ''}"


from .issues.models import ForgeIssue  # noqa: E402,F401  (the app's models)
from .pulls.models import Comparison, PullAction, PullRequest, PullRun  # noqa: E402,F401
