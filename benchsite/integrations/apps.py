from django.apps import AppConfig


class HooksConfig(AppConfig):
    name = "benchsite.integrations"
    label = "hooks"
    verbose_name = "Git push webhooks and API"

    def ready(self):
        from benchsite.bench.lifecycle.signals import outcome_changed, run_finished, run_started

        from benchsite.regressions.signals import change_point_changed

        from . import receivers, tasks, watches_section  # noqa: F401  (tasks: registers hooks.* with Celery)
        from .issues import receivers as issue_receivers
        from .issues import tasks as issue_tasks  # noqa: F401  (registers hooks.sync_issue)
        from .pulls import results, retention
        from .pulls import tasks as pull_tasks  # noqa: F401  (registers hooks.report_pull)

        outcome_changed.connect(receivers.report_status_when_outcome_changes, dispatch_uid="hooks.commit_status")
        run_started.connect(results.comparison_started, dispatch_uid="hooks.pull_started")
        run_finished.connect(results.comparison_run_finished, dispatch_uid="hooks.pull_finished")
        change_point_changed.connect(issue_receivers.issues_follow_change, dispatch_uid="hooks.forge_issues")
        retention.register_rules()  # bench_gc keeps the runs of open pull requests
        watches_section.register()  # bench_apply applies a file's `watches:` through it
