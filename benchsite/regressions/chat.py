"""An alert's payload (alerts.alert_payload) as a Slack incoming-webhook message: `text`, the one
line shown in notifications and by clients without blocks, and `blocks`, mrkdwn sections.
Mattermost and Discord's Slack-compatible endpoint (`.../slack`) take the same body. Pure."""
from __future__ import annotations

from benchsite.bench.domain.units import change_text, interval_text, metric_label, metric_text

_LINK_WORDS = {"run": "run", "previous_run": "previous run", "confirm_run": "re-run", "benchmark": "benchmark",
               "changes": "change page"}


def summary(payload: dict) -> str:
    """One line: '[benchmark/variant] what changed at old..new'."""
    return f"[{payload['benchmark']}/{payload['variant']}] {_what(payload)} at {_commits(payload)}"


def slack_body(payload: dict) -> dict:
    fields = [("Metric", payload.get("label") or metric_label(payload["metric"])),
              ("Change", _change(payload)),
              *([("Interval", interval_text(payload["ci_low"], payload["ci_high"]))] if _has_interval(payload) else []),
              ("Commits", f"`{_commits(payload)}`"),
              ("Benchmark", f"{payload['benchmark']} / {payload['variant']}")]
    blocks = [_section(f"*{_escape(_headline(payload))}*"),
              {"type": "section", "fields": [_mrkdwn(f"*{name}*\n{_escape(value)}") for name, value in fields]}]
    links = _links(payload.get("links") or {})
    if links:
        blocks.append(_section(links))
    return {"text": _escape(summary(payload)), "blocks": blocks}


def _what(payload: dict) -> str:
    if payload["event"] == "incorrect_output":
        return "output became incorrect"
    return f"{metric_label(payload['metric'])} {_change(payload)}"


def _change(payload: dict) -> str:
    if payload["event"] == "incorrect_output":
        return "output became incorrect"
    metric = payload["metric"]
    return (f"{change_text(payload['change'])} "
            f"({metric_text(metric, payload['before'])} -> {metric_text(metric, payload['after'])})")


def _commits(payload: dict) -> str:
    return f"{(payload['previous_commit'] or '?')[:12]}..{(payload['commit'] or '?')[:12]}"


def _has_interval(payload: dict) -> bool:
    return payload.get("ci_low") is not None and payload.get("ci_high") is not None


def _headline(payload: dict) -> str:
    kind = "Incorrect output" if payload["event"] == "incorrect_output" else "Regression"
    return f"{kind} on {payload['benchmark']}/{payload['variant']}: {_what(payload)}"


def _links(links: dict) -> str:
    words = [(key, _LINK_WORDS.get(key, key.replace("_", " "))) for key in links]
    return " · ".join(f"<{links[key]}|{word}>" for key, word in words)


def _escape(text: str) -> str:
    """Slack's control characters (in `text` as in mrkdwn blocks); the rest is shown as written."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _mrkdwn(text: str) -> dict:
    return {"type": "mrkdwn", "text": text}


def _section(text: str) -> dict:
    return {"type": "section", "text": _mrkdwn(text)}
