"""The JSON API answers as it did before it moved to Django REST framework: the same status,
headers and body bytes for each request below, on the database of api_seed.py. The answers of the
hand-written views (before the move) are kept in api_golden/; a request whose answer may differ
is listed in DIFFERENCES with the reason.

    BENCH_API_GOLDEN_WRITE=1 pytest tests/benchsite/integrations/test_api_unchanged.py   # rewrite api_golden/

Each request runs on its own: its writes are rolled back and the rate-limit counters start at zero.
A new run's id, URL and times (a POST's 201) and a Retry-After's seconds are masked, in both."""
import gzip
import json
import os
import re
from pathlib import Path
from urllib.parse import quote

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.test import Client, override_settings

from .api_seed import (C16, H2, MEMBER_GROUP, MEMBER_TOKEN, REVOKED_TOKEN, SHA_A, SHA_B, SHA_C, TWIN,
                       VIEWER_TOKEN, api_seed)

pytestmark = pytest.mark.django_db
GOLDEN = Path(__file__).parent / "api_golden"
WRITE = os.environ.get("BENCH_API_GOLDEN_WRITE") == "1"

# name -> why its answer may differ from the golden one (none may).
DIFFERENCES: dict[str, str] = {}

PRIVATE = {"BENCH_PRIVATE_DASHBOARD": True}
LIMIT_2 = {"BENCH_API_REQUESTS_PER_MIN": 2}


def bearer(raw):
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


def get(name, path, **options):
    return {"name": name, "method": "GET", "path": path, **options}


def post(name, body, headers=None, **options):
    data = body if isinstance(body, str) else json.dumps(body)
    return {"name": name, "method": "POST", "path": "/api/runs/", "body": data,
            "headers": bearer(MEMBER_TOKEN) if headers is None else headers, **options}


RUNS = [
    get("all", "/api/runs/"),
    get("commit-prefix", f"/api/runs/?commit={SHA_A[:7]}"),
    get("commit-full-upper", f"/api/runs/?commit={SHA_A.upper()}"),
    get("benchmark", "/api/runs/?benchmark=golden-b"),
    get("states", "/api/runs/?state=queued,%20failed"),
    get("state-repeated", "/api/runs/?state=QUEUED&state=FAILED"),
    get("outcomes", "/api/runs/?outcome=incorrect,failed"),
    get("ref", "/api/runs/?ref=perf/x"),
    get("branch", "/api/runs/?branch=main"),
    get("pull-request", "/api/runs/?pull_request=12&repo=github.com/acme/vllm"),
    get("pull-request-url", "/api/runs/?pull_request=12&repo=https://github.com/Acme/vllm.git"),
    get("pull-request-none", "/api/runs/?pull_request=13&repo=github.com/acme/vllm"),
    get("limit-2", "/api/runs/?limit=2"),
    get("limit-500", "/api/runs/?limit=500"),
    get("point", f"/api/runs/?point={C16}"),
    get("point-absent", "/api/runs/?point=c2-p0-m8-r4.5"),
    get("empty-values", "/api/runs/?commit=&benchmark=&state=&outcome=&ref=&branch=&point="),
    get("everything", f"/api/runs/?commit={SHA_A[:7]}&benchmark=golden-a&state=SUCCEEDED&outcome=incorrect"
                      f"&ref=main&branch=main&limit=5&point={C16}"),
    get("accept-html", "/api/runs/?limit=1", headers={"HTTP_ACCEPT": "text/html"}),
    get("accept-xml", "/api/runs/?limit=1", headers={"HTTP_ACCEPT": "application/xml"}),
    get("accept-indent", "/api/runs/?limit=1", headers={"HTTP_ACCEPT": "application/json; indent=4"}),
    get("gzip", "/api/runs/", headers={"HTTP_ACCEPT_ENCODING": "gzip"}),
    get("wrong-token-public", "/api/runs/?limit=1", headers=bearer("dbt_nope")),
    get("no-slash", "/api/runs"),
    # bad parameters
    get("commit-not-hex", "/api/runs/?commit=not-hex"),
    get("commit-short", "/api/runs/?commit=abc"),
    get("benchmark-unknown", "/api/runs/?benchmark=nope"),
    get("state-unknown", "/api/runs/?state=DONE,queued"),
    get("outcome-unknown", "/api/runs/?outcome=green"),
    get("limit-word", "/api/runs/?limit=many"),
    get("limit-0", "/api/runs/?limit=0"),
    get("limit-501", "/api/runs/?limit=501"),
    get("limit-float", "/api/runs/?limit=2.5"),
    get("unknown", f"/api/runs/?sha={SHA_A}"),
    get("unknowns", "/api/runs/?zeta=1&alpha=2&commit=aaaa"),
    get("format-json", "/api/runs/?format=json"),
    get("format-api", "/api/runs/?format=api"),
    get("nul-benchmark", "/api/runs/?benchmark=%00"),
    get("nul-ref", "/api/runs/?ref=main%00"),
    get("pull-request-alone", "/api/runs/?pull_request=12"),
    get("repo-alone", "/api/runs/?repo=github.com/acme/vllm"),
    get("pull-request-word", "/api/runs/?pull_request=twelve&repo=github.com/acme/vllm"),
    get("pull-request-negative", "/api/runs/?pull_request=-1&repo=github.com/acme/vllm"),
    get("pull-request-huge", "/api/runs/?pull_request=99999999999&repo=github.com/acme/vllm"),
    get("repo-bad", "/api/runs/?pull_request=12&repo=acme"),
    get("repo-ipv6", "/api/runs/?pull_request=12&repo=%5B::1"),
    get("point-bad", "/api/runs/?point=sixteen"),
    get("unicode-value", "/api/runs/?benchmark=%C3%A9t%C3%A9"),
    # methods
    get("put", "/api/runs/", method="PUT"),
    get("delete", "/api/runs/", method="DELETE"),
    get("patch", "/api/runs/", method="PATCH"),
    get("head", "/api/runs/", method="HEAD"),
    get("options", "/api/runs/", method="OPTIONS"),
    # a private dashboard: reading takes a session or a token
    get("private-anonymous", "/api/runs/?limit=1", settings=PRIVATE),
    get("private-member", "/api/runs/?limit=1", settings=PRIVATE, headers=bearer(MEMBER_TOKEN)),
    get("private-viewer", "/api/runs/?limit=1", settings=PRIVATE, headers=bearer(VIEWER_TOKEN)),
    get("private-wrong", "/api/runs/?limit=1", settings=PRIVATE, headers=bearer("dbt_nope")),
    get("private-revoked", "/api/runs/?limit=1", settings=PRIVATE, headers=bearer(REVOKED_TOKEN)),
    get("private-basic", "/api/runs/?limit=1", settings=PRIVATE, headers={"HTTP_AUTHORIZATION": "Basic Y2k6eA=="}),
    get("private-bearer-empty", "/api/runs/?limit=1", settings=PRIVATE, headers={"HTTP_AUTHORIZATION": "Bearer "}),
    get("private-session", "/api/runs/?limit=1", settings=PRIVATE, login="browser"),
    get("private-bad-parameter", "/api/runs/?limit=0", settings=PRIVATE),
    # rate limits: by address, by token (wrong or not), before the token is looked at
    get("limited-address", "/api/runs/?limit=1", settings=LIMIT_2, times=3),
    get("limited-token", "/api/runs/?limit=1", settings=LIMIT_2, times=3, headers=bearer("dbt_nope")),
    get("limited-private", "/api/runs/?limit=1", settings={**LIMIT_2, **PRIVATE}, times=3),
    get("limited-bad-parameter", "/api/runs/?limit=0", settings=LIMIT_2, times=3),
    get("limited-put", "/api/runs/", method="PUT", settings=LIMIT_2, times=3),
]

TRIGGER = [
    post("commit", {"benchmark": "golden-a", "commit": SHA_A.upper(), "variants": ["compiled"]}, volatile=True),
    post("ref-ladder", {"benchmark": "golden-a", "ref": "perf/fused-rmsnorm", "repeats": 3}, volatile=True),
    post("installed-engine-forced", {"benchmark": "golden-b", "force": True}, volatile=True),
    post("unserved-pool", {"benchmark": "golden-b"}),
    post("unserved-pool-force-false", {"benchmark": "golden-b", "variants": ["eager"], "force": False}),
    post("installed-engine-ref", {"benchmark": "golden-b", "ref": "main", "force": True}),
    post("text-plain", json.dumps({"benchmark": "golden-a", "ref": "main"}), content_type="text/plain",
         volatile=True),
    post("form-encoded", "benchmark=golden-a&ref=main", content_type="application/x-www-form-urlencoded"),
    post("query-ignored", {"benchmark": "golden-a", "ref": "main"}, path="/api/runs/?junk=1&format=api",
         volatile=True),
    post("accept-html", {"benchmark": "golden-a", "ref": "main"},
         headers={**bearer(MEMBER_TOKEN), "HTTP_ACCEPT": "text/html"}, volatile=True),
    # tokens and roles
    post("no-token", {"benchmark": "golden-a", "commit": SHA_A}, headers={}),
    post("wrong-token", {"benchmark": "golden-a", "commit": SHA_A}, headers=bearer("dbt_not-a-real-token")),
    post("basic", {"benchmark": "golden-a", "commit": SHA_A}, headers={"HTTP_AUTHORIZATION": "Basic Y2k6eA=="}),
    post("bearer-empty", {"benchmark": "golden-a", "commit": SHA_A}, headers={"HTTP_AUTHORIZATION": "Bearer  "}),
    post("lowercase-bearer", {"benchmark": "golden-a", "ref": "main"},
         headers={"HTTP_AUTHORIZATION": f"bearer {MEMBER_TOKEN}"}, volatile=True),
    post("revoked", {"benchmark": "golden-a", "commit": SHA_A}, headers=bearer(REVOKED_TOKEN)),
    post("viewer", {"benchmark": "golden-a", "commit": SHA_A}, headers=bearer(VIEWER_TOKEN)),
    post("viewer-bad-body", "{not json", headers=bearer(VIEWER_TOKEN)),
    post("session-no-token", {"benchmark": "golden-a", "commit": SHA_A}, headers={}, login="member"),
    post("session-wrong-token", {"benchmark": "golden-a", "commit": SHA_A}, headers=bearer("dbt_nope"),
         login="member"),
    post("private-member", {"benchmark": "golden-a", "ref": "main"}, settings=PRIVATE, volatile=True),
    post("private-no-token", {"benchmark": "golden-a", "ref": "main"}, headers={}, settings=PRIVATE),
    # bad bodies
    post("not-json", "{not json"),
    post("empty", ""),
    post("not-utf8", "\udcff"),
    post("null", "null"),
    post("list", [1, 2]),
    post("string", "\"golden-a\""),
    post("nul-benchmark", {"benchmark": "\x00"}),
    post("nul-variant", {"benchmark": "golden-a", "ref": "main", "variants": ["eager\x00"]}),
    post("unknown-fields", {"benchmark": "golden-a", "ref": "main", "priority": 1, "zeta": 2}),
    post("no-benchmark", {"ref": "main"}),
    post("benchmark-number", {"benchmark": 7, "ref": "main"}),
    post("benchmark-unknown", {"benchmark": "nope", "commit": SHA_A}),
    post("no-commit-or-ref", {"benchmark": "golden-a"}),
    post("commit-short", {"benchmark": "golden-a", "commit": "abc123"}),
    post("commit-number", {"benchmark": "golden-a", "commit": 12345}),
    post("ref-option", {"benchmark": "golden-a", "ref": "--upload-pack=evil"}),
    post("ref-dotdot", {"benchmark": "golden-a", "ref": "a..b"}),
    post("variants-unknown", {"benchmark": "golden-a", "ref": "main", "variants": ["turbo", "eager"]}),
    post("variants-empty", {"benchmark": "golden-a", "ref": "main", "variants": []}),
    post("variants-string", {"benchmark": "golden-a", "ref": "main", "variants": "eager"}),
    post("force-string", {"benchmark": "golden-a", "ref": "main", "force": "yes"}),
    post("repeats-zero", {"benchmark": "golden-a", "ref": "main", "repeats": 0}),
    post("repeats-true", {"benchmark": "golden-a", "ref": "main", "repeats": True}),
    post("repeats-51", {"benchmark": "golden-a", "ref": "main", "repeats": 51}),
    post("unicode", {"benchmark": "\u00e9t\u00e9 \u2014 \U0001f680", "ref": "main"}),
    post("limited", {"benchmark": "golden-a", "commit": "abc"}, settings=LIMIT_2, times=3),
    post("limited-no-token", {"benchmark": "golden-a", "commit": SHA_A}, headers={}, settings=LIMIT_2, times=3),
]

COMMITS = [
    get("full", f"/api/commits/{SHA_A}/"),
    get("prefix", f"/api/commits/{SHA_B[:7]}/"),
    get("prefix-upper", f"/api/commits/{SHA_A[:9].upper()}/"),
    get("twin", f"/api/commits/{TWIN}/"),
    get("pull-head", f"/api/commits/{H2}/"),
    get("query-ignored", f"/api/commits/{SHA_A}/?junk=1"),
    get("ambiguous", f"/api/commits/{SHA_A[:8]}/"),
    get("too-short", f"/api/commits/{SHA_A[:6]}/"),
    get("not-hex", "/api/commits/zzzzzzzz/"),
    get("too-long", f"/api/commits/{'a' * 65}/"),
    get("unicode", f"/api/commits/{quote(chr(233) * 8)}/"),
    get("nul", "/api/commits/aaaaaaa%00/"),
    get("unknown", f"/api/commits/{'e' * 40}/"),
    get("bisection-only", f"/api/commits/{SHA_C}/"),
    get("post", f"/api/commits/{SHA_A}/", method="POST", body="{}"),
    get("head", f"/api/commits/{SHA_A}/", method="HEAD"),
    get("options", f"/api/commits/{SHA_A}/", method="OPTIONS"),
    get("private-anonymous", f"/api/commits/{SHA_A}/", settings=PRIVATE),
    get("private-viewer", f"/api/commits/{SHA_B}/", settings=PRIVATE, headers=bearer(VIEWER_TOKEN)),
    get("private-wrong", f"/api/commits/{SHA_A}/", settings=PRIVATE, headers=bearer("dbt_nope")),
    get("private-session", f"/api/commits/{SHA_B}/", settings=PRIVATE, login="browser"),
    get("limited", f"/api/commits/{SHA_B}/", settings=LIMIT_2, times=3),
]

PULLS = [
    get("pull", "/api/pulls/github.com/acme/vllm/12/"),
    get("pull-case", "/api/pulls/GitHub.com/Acme/vllm.git/12/"),
    get("subgroups", "/api/pulls/gitlab.com/g/sub/vllm/3/"),
    get("query-ignored", "/api/pulls/github.com/acme/vllm/12/?junk=1"),
    get("unknown-number", "/api/pulls/github.com/acme/vllm/13/"),
    get("unknown-host", "/api/pulls/gitlab.com/acme/vllm/12/"),
    get("number-huge", "/api/pulls/github.com/acme/vllm/99999999999999999999/"),
    get("number-0", "/api/pulls/github.com/acme/vllm/0/"),
    get("nul", "/api/pulls/github.com/acme/vl%00lm/12/"),
    get("newline", "/api/pulls/a%0Ab/c/1/"),
    get("malformed-word", "/api/pulls/github.com/acme/vllm/twelve/"),
    get("malformed-short", "/api/pulls/github.com/12/"),
    get("malformed-root", "/api/pulls/"),
    get("malformed-unicode", "/api/pulls/%C3%A9/"),
    get("post", "/api/pulls/github.com/acme/vllm/12/", method="POST", body="{}"),
    get("post-malformed", "/api/pulls/nope/", method="POST", body="{}"),
    get("head", "/api/pulls/github.com/acme/vllm/12/", method="HEAD"),
    get("private-anonymous", "/api/pulls/github.com/acme/vllm/12/", settings=PRIVATE),
    get("private-member", "/api/pulls/github.com/acme/vllm/12/", settings=PRIVATE, headers=bearer(MEMBER_TOKEN)),
    get("private-revoked", "/api/pulls/github.com/acme/vllm/12/", settings=PRIVATE, headers=bearer(REVOKED_TOKEN)),
    get("private-malformed", "/api/pulls/nope/", settings=PRIVATE),
    get("limited", "/api/pulls/github.com/acme/vllm/12/", settings=LIMIT_2, times=3),
    get("limited-malformed", "/api/pulls/nope/", settings=LIMIT_2, times=3),
]

MARKS = [
    get("default", "/api/benchmarks/golden-a/marks/"),
    get("metric", "/api/benchmarks/golden-a/marks/?metric=decode_tok_s"),
    get("default-point", "/api/benchmarks/golden-a/marks/?point=c1-p0-m64"),
    get("point", f"/api/benchmarks/golden-a/marks/?point={C16}"),
    get("other-metric", "/api/benchmarks/golden-a/marks/?metric=itl_ms_p50"),
    get("unknown-parameter", "/api/benchmarks/golden-a/marks/?zeta=1"),
    get("none", "/api/benchmarks/golden-b/marks/"),
    get("metric-unknown", "/api/benchmarks/golden-a/marks/?metric=nope"),
    get("metric-unicode", "/api/benchmarks/golden-a/marks/?metric=%C3%A9t%C3%A9"),
    get("benchmark-unknown", "/api/benchmarks/nope/marks/"),
    get("post", "/api/benchmarks/golden-a/marks/", method="POST", body="{}"),
    get("head", "/api/benchmarks/golden-a/marks/", method="HEAD"),
    get("private-anonymous", "/api/benchmarks/golden-a/marks/", settings=PRIVATE),
    get("private-session", "/api/benchmarks/golden-a/marks/", settings=PRIVATE, login="browser"),
    get("many", "/api/benchmarks/golden-a/marks/", settings=LIMIT_2, times=3),
]

GROUPS = {"runs": RUNS, "trigger": TRIGGER, "commits": COMMITS, "pulls": PULLS, "marks": MARKS}
_VOLATILE = [(re.compile(r'"id": \d+'), '"id": "<id>"'), (re.compile(r"/runs/\d+/"), "/runs/<id>/"),
             (re.compile(r'"(created_at|last_seen_at)": "[^"]+"'), r'"\1": "<time>"')]


def _mask(body: str) -> str:
    for pattern, replacement in _VOLATILE:
        body = pattern.sub(replacement, body)
    return body


def _answer(response, volatile: bool) -> dict:
    headers = dict(response.headers)
    body = response.content
    if headers.get("Content-Encoding") == "gzip":  # Django pads it with random bytes (BREACH)
        body, headers["Content-Length"] = gzip.decompress(body), "<gzip>"
    if "Retry-After" in headers:
        assert 1 <= int(headers["Retry-After"]) <= 60, headers["Retry-After"]
        headers["Retry-After"] = "<1-60>"
    text = body.decode()
    if volatile:
        assert response.status_code == 201, text
        text = _mask(text)
        headers["Content-Length"] = "<masked>"
    return {"status": response.status_code, "headers": headers, "body": text}


def _ask(client, request: dict) -> list[dict]:
    from django.core.cache import cache

    extra = dict(request.get("headers") or {})
    if "content_type" in request or request["method"] == "POST":
        extra["content_type"] = request.get("content_type", "application/json")
    body = request.get("body", "")
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogateescape")
    cache.clear()
    if request.get("login"):
        client.force_login(User.objects.get(username=request["login"]))
    answers = []
    with override_settings(**{"BENCH_API_REQUESTS_PER_MIN": 1000, "BENCH_MEMBER_GROUP": MEMBER_GROUP,
                              **request.get("settings", {})}):
        for _ in range(request.get("times", 1)):
            with transaction.atomic():
                response = client.generic(request["method"], request["path"], data=body,
                                          **extra)
                transaction.set_rollback(True)
            answers.append(_answer(response, request.get("volatile", False)))
    client.logout()
    return answers


@pytest.mark.parametrize("group", GROUPS)
def test_the_api_answers_as_before(group):
    api_seed()
    client = Client(enforce_csrf_checks=True)  # as a browser's session would be checked
    requests = GROUPS[group]
    assert len({r["name"] for r in requests}) == len(requests)
    answers = {r["name"]: {"request": {k: v for k, v in r.items() if k != "name"}, "answers": _ask(client, r)}
               for r in requests}
    path = GOLDEN / f"{group}.json"
    if WRITE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(json.dumps(answers, indent=1) + "\n")
        return
    golden = json.loads(path.read_text())
    assert set(answers) == set(golden), "the requests changed: rewrite api_golden/ from the code before the move"
    changed = [name for name in answers if answers[name] != golden[name] and f"{group}/{name}" not in DIFFERENCES]
    for name in changed:
        was, now = json.dumps(golden[name]["answers"]), json.dumps(answers[name]["answers"])
        at = next((i for i, (a, b) in enumerate(zip(was, now)) if a != b), min(len(was), len(now)))
        print(f"--- {group}/{name} from character {at}\nwas: ...{was[max(0, at - 200):at + 300]}\n"
              f"now: ...{now[max(0, at - 200):at + 300]}")
    assert not changed, f"answers that differ from api_golden/{group}.json: {changed}"
    listed = [name for name in DIFFERENCES if name.startswith(f"{group}/")]
    assert all(answers[n.split("/", 1)[1]] != golden[n.split("/", 1)[1]] for n in listed), \
        "a listed difference is gone: remove it from DIFFERENCES"

