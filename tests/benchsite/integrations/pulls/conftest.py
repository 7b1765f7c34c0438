"""A GitHub and a GitLab on 127.0.0.1 for the pull-request reports and the regression issues:
each request recorded (method, path, headers, JSON), answers as the real APIs give them (issue
payloads checked against their documented fields), scriptable failures, and the App's JWT
checked against the test key's public half."""
import itertools
import json
import re
from urllib.parse import parse_qs
import threading
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from benchsite.bench.models import Benchmark
from benchsite.integrations.models import RepoWatch
from benchsite.integrations.github import app as github_app
from benchsite.integrations.pulls.models import Comparison, PullRequest

from ..conftest import SHA_B, make_benchmark

APP_ID = "4242"
INSTALLATION = 77
INSTALLATION_TOKEN = "ghs_installation_token"
TOKEN = "ghp_personal_token"
GITLAB_TOKEN = "glpat-test-token"
PUBLIC = "https://bench.example.org"


class FakeForge:
    """Routes: (method, regex of the path) -> callable(match, body) -> (code, answer). `fail(method,
    fragment, code, times)` makes the next TIMES matching requests answer CODE first."""

    def __init__(self, prefix: str, public_key=None):
        self.requests: list[dict] = []
        self.failures: list[list] = []
        self.public_key = public_key
        self.expires_in = timedelta(hours=1)
        self.gone: set[str] = set()  # comment or note ids answered 404
        self.check_runs: list[dict] = []
        self.statuses: dict[tuple, str] = {}
        self.roles: dict[str, str] = {}  # login -> role on every repository (none when not listed)
        self.issues: dict[int, dict] = {}  # number (GitHub) or iid (GitLab) -> the issue as the forge keeps it
        self._numbers = itertools.count(1)
        self._ids = itertools.count(1001)
        self._lock = threading.Lock()
        self.routes = self._routes()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw) if raw else None
                code, answer = fake.answer(self.command, self.path, httpx.Headers(dict(self.headers)), body)
                data = json.dumps(answer).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_PUT = _any

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{prefix}"
        self.prefix = prefix
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _routes(self):
        def new_id(match, body):
            return 201, {"id": next(self._ids)}

        def edit(match, body):
            return (404, {"message": "Not Found"}) if match[1] in self.gone else (200, {"id": int(match[1])})

        return [
            ("GET", r"/repos/[^/]+/[^/]+/installation", lambda m, b: (200, {"id": INSTALLATION})),
            ("POST", r"/app/installations/(\d+)/access_tokens", self._access_token),
            ("GET", r"/repos/[^/]+/[^/]+/commits/(\w+)/check-runs\?check_name=([^&]+)&filter=all", self._check_runs),
            ("POST", r"/repos/[^/]+/[^/]+/check-runs", self._new_check_run),
            ("GET", r"/repos/[^/]+/[^/]+/collaborators/([^/]+)/permission", self._permission),
            ("PATCH", r"/repos/[^/]+/[^/]+/check-runs/(\d+)", lambda m, b: (200, {"id": int(m[1])})),
            ("POST", r"/repos/[^/]+/[^/]+/statuses/\w+", lambda m, b: (201, {"state": b["state"]})),
            ("POST", r"/repos/[^/]+/[^/]+/issues/\d+/comments", new_id),
            ("PATCH", r"/repos/[^/]+/[^/]+/issues/comments/(\d+)", edit),
            ("POST", r"/projects/([^/]+)/statuses/(\w+)", self._gitlab_status),
            ("POST", r"/projects/[^/]+/merge_requests/\d+/notes", new_id),
            ("PUT", r"/projects/[^/]+/merge_requests/\d+/notes/(\d+)", edit),
            *self._issue_routes(new_id),
        ]

    def _issue_routes(self, new_id):
        return [
            ("GET", r"/repos/[^/]+/[^/]+/issues\?(.*)", self._github_issues),
            ("POST", r"/repos/([^/]+)/([^/]+)/issues", self._github_new_issue),
            ("PATCH", r"/repos/[^/]+/[^/]+/issues/(\d+)", self._github_edit_issue),
            ("GET", r"/projects/[^/]+/issues\?(.*)", self._gitlab_issues),
            ("POST", r"/projects/([^/]+)/issues", self._gitlab_new_issue),
            ("PUT", r"/projects/[^/]+/issues/(\d+)", self._gitlab_edit_issue),
            ("POST", r"/projects/[^/]+/issues/(\d+)/notes", self._issue_note(new_id)),
        ]

    def _issue_note(self, new_id):
        def note(match, body):
            if int(match[1]) not in self.issues or not isinstance((body or {}).get("body"), str):
                return 404 if int(match[1]) not in self.issues else 400, {"message": "bad note"}
            return new_id(match, body)
        return note

    def _github_issues(self, match, body):
        query = parse_qs(match[1])
        label = query["labels"][0]
        found = [i for i in self.issues.values() if label in [x["name"] for x in i["labels"]]]
        return 200, sorted(found, key=lambda i: -i["number"])

    def _github_new_issue(self, match, body):
        """POST /repos/{owner}/{repo}/issues: title (required), body, labels (names); 201 with the issue."""
        if not isinstance(body.get("title"), str) or not body["title"] or set(body) - {"title", "body", "labels"} \
                or not all(isinstance(x, str) for x in body.get("labels", [])):
            return 422, {"message": "Validation Failed"}
        number = next(self._numbers)
        self.issues[number] = {"number": number, "title": body["title"], "body": body.get("body"), "state": "open",
                               "labels": [{"name": x} for x in body.get("labels", [])],
                               "html_url": f"https://github.com/{match[1]}/{match[2]}/issues/{number}"}
        return 201, self.issues[number]

    def _github_edit_issue(self, match, body):
        """PATCH .../issues/{number}: title, body, state open|closed, state_reason completed|not_planned|reopened."""
        issue = self.issues.get(int(match[1]))
        if issue is None:
            return 404, {"message": "Not Found"}
        if set(body) - {"title", "body", "state", "state_reason"} or body.get("state", "open") not in ("open", "closed") \
                or body.get("state_reason", "completed") not in ("completed", "not_planned", "reopened"):
            return 422, {"message": "Validation Failed"}
        issue.update(body)
        return 200, issue

    def _gitlab_issues(self, match, body):
        query = parse_qs(match[1])
        label, search = query["labels"][0], query.get("search", [""])[0]
        found = [i for i in self.issues.values() if label in i["labels"] and search in (i["description"] or "")]
        return 200, sorted(found, key=lambda i: -i["iid"])

    def _gitlab_new_issue(self, match, body):
        """POST /projects/:id/issues: title (required), description, labels (comma-separated)."""
        if not isinstance(body.get("title"), str) or not body["title"] or set(body) - {"title", "description", "labels"} \
                or not isinstance(body.get("labels", ""), str):
            return 400, {"message": "title is missing"}
        iid = next(self._numbers)
        self.issues[iid] = {"iid": iid, "title": body["title"], "description": body.get("description"),
                            "state": "opened", "labels": body.get("labels", "").split(","),
                            "web_url": f"https://gitlab.com/{unquote(match[1])}/-/issues/{iid}"}
        return 201, self.issues[iid]

    def _gitlab_edit_issue(self, match, body):
        """PUT /projects/:id/issues/:iid: title, description, state_event close|reopen."""
        issue = self.issues.get(int(match[1]))
        if issue is None:
            return 404, {"message": "404 Not found"}
        if set(body) - {"title", "description", "state_event"} or body.get("state_event", "close") not in ("close", "reopen"):
            return 400, {"message": "state_event does not have a valid value"}
        issue.update({k: v for k, v in body.items() if k != "state_event"})
        if "state_event" in body:
            issue["state"] = "closed" if body["state_event"] == "close" else "opened"
        return 200, issue

    def _new_check_run(self, match, body):
        self.check_runs.append({"id": next(self._ids), **body})
        return 201, {"id": self.check_runs[-1]["id"]}

    def _check_runs(self, match, body):
        found = [r for r in self.check_runs if r["head_sha"] == match[1] and r["name"] == unquote(match[2])]
        return 200, {"total_count": len(found), "check_runs": found}

    def _permission(self, match, body):
        """As GitHub answers: `permission` folds maintain into write and triage into read."""
        role = self.roles.get(unquote(match[1]), "none")
        folded = {"maintain": "write", "triage": "read"}.get(role, role)
        return 200, {"permission": folded, "role_name": role, "user": {"login": unquote(match[1])}}

    def _gitlab_status(self, match, body):
        """GitLab refuses a status in the state it has already."""
        key = (match[1], match[2], body["name"])
        if self.statuses.get(key) == body["state"]:
            return 400, {"message": f"Cannot transition status via :enqueue from :{body['state']}"}
        self.statuses[key] = body["state"]
        return 201, {"status": body["state"]}

    def _access_token(self, match, body):
        expires = datetime.now(timezone.utc) + self.expires_in
        return 201, {"token": INSTALLATION_TOKEN, "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}

    def _app_jwt_refused(self, headers) -> str | None:
        """Why the App's JWT is not good (None when it is): RS256, signed by the key, iss the App."""
        scheme, _, token = headers.get("Authorization", "").partition(" ")
        try:
            assert scheme == "Bearer", "not a Bearer token"
            assert jwt.get_unverified_header(token)["alg"] == "RS256", "not RS256"
            claims = jwt.decode(token, self.public_key, algorithms=["RS256"],
                                options={"require": ["iat", "exp", "iss"]})
            assert claims["iss"] == APP_ID and claims["exp"] - claims["iat"] <= 600, claims
        except (AssertionError, jwt.PyJWTError) as exc:
            return str(exc) or type(exc).__name__
        return None

    def answer(self, method, path, headers, body):
        with self._lock:
            self.requests.append({"method": method, "path": path, "headers": headers, "json": body})
            for failure in self.failures:
                if failure[0] == method and failure[1] in path and failure[3] > 0:
                    failure[3] -= 1
                    return failure[2], {"message": "scripted failure"}
        local = path.removeprefix(self.prefix)
        if "/installation" in local or "/access_tokens" in local:
            refused = self._app_jwt_refused(headers)
            if refused:
                return 401, {"message": f"bad JWT: {refused}"}
        for verb, pattern, handler in self.routes:
            match = re.fullmatch(pattern, local)
            if verb == method and match:
                return handler(match, body)
        return 404, {"message": f"no route {method} {local}"}

    def fail(self, method: str, fragment: str, code: int, times: int = 1):
        self.failures.append([method, fragment, code, times])

    def calls(self, method: str, fragment: str) -> list[dict]:
        return [r for r in self.requests if r["method"] == method and fragment in r["path"]]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def app_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def pem(key) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption()).decode()


@pytest.fixture
def forget_tokens():
    github_app.forget_tokens()
    yield
    github_app.forget_tokens()


@pytest.fixture
def github(settings, app_key, forget_tokens):
    """A fake GitHub, with the App configured and no personal token."""
    with FakeForge("/api/v3", public_key=app_key.public_key()) as fake:
        settings.BENCH_GITHUB_API_URL = fake.url
        settings.BENCH_GITHUB_APP_ID = APP_ID
        settings.BENCH_GITHUB_APP_PRIVATE_KEY = pem(app_key)
        settings.BENCH_GITHUB_TOKEN = ""
        settings.BENCH_PUBLIC_URL = PUBLIC
        yield fake


@pytest.fixture
def gitlab(settings):
    with FakeForge("/api/v4") as fake:
        settings.BENCH_GITLAB_API_URL = fake.url
        settings.BENCH_GITLAB_TOKEN = GITLAB_TOKEN
        settings.BENCH_PUBLIC_URL = PUBLIC
        yield fake


def make_comparison(*, provider="github", repo_url="https://github.com/acme/vllm", number=12, slug="tiny-a",
                    state="queued", pull_requests=None, pull=None, **fields) -> Comparison:
    """A comparison of PR NUMBER's head SHA_B (its pull request and watch made when not given)."""
    if pull is None:
        watch = RepoWatch.objects.create(repo_url=repo_url, branches=["main"], secret_env="X",
                                         pull_requests=pull_requests or {})
        pull = PullRequest.objects.create(watch=watch, provider=provider, repo_key=watch.repo_key, number=number,
                                          base_branch="main", head_sha=SHA_B, url=f"{repo_url}/pull/{number}")
    benchmark = Benchmark.objects.filter(slug=slug).first() or make_benchmark(slug, "https://github.com/acme/vllm.git")
    return Comparison.objects.create(pull=pull, benchmark=benchmark, head_sha=pull.head_sha, base_branch="main",
                                     state=state, **fields)


def row(variant="eager", outcome="passed", **over) -> dict:
    """A table row as the judgement writes it."""
    return {"variant": variant, "outcome": outcome, "metric": "decode_tok_s", "unit": "tok/s", "base": 41.2,
            "head": 40.9, "effect": -0.0073, "ci_low": -0.02, "ci_high": 0.006, "threshold": 0.03,
            "correctness": "identical", "correctness_reason": "", "share_base": 0.42, "share_head": 0.40,
            "took_effect": "", "base_runs": [1, 3], "head_runs": [2, 4], "note": "", **over}


def finish(comparison, outcome="passed", summary="eager: within 3%", table=None) -> Comparison:
    comparison.state, comparison.outcome, comparison.summary = "done", outcome, summary
    comparison.table = [row(outcome=outcome)] if table is None else table
    comparison.save()
    return comparison
