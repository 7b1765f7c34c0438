"""Pull-request deliveries as GitHub and GitLab send them: the shapes of the published octokit
webhook examples (pull_request, issue_comment, check_run) and of GitLab's documentation (Merge
Request Hook, Note Hook), cut to the fields a reader may look at."""
REPO = "https://github.com/vllm-project/vllm"
FORK = "https://github.com/someone/vllm"
HEAD = "1" * 40
HEAD2 = "2" * 40
BASE_TIP = "9" * 40


def _repo(url: str, fork: bool = False) -> dict:
    full = url.split("github.com/")[-1]
    return {"id": hash(full) % 10**6, "full_name": full, "fork": fork, "html_url": url, "clone_url": url + ".git",
            "ssh_url": f"git@github.com:{full}.git", "owner": {"login": full.split("/")[0]}}


def github_pull_request(action="opened", *, number=12, head=HEAD, fork=False, draft=False, labels=(), label=None,
                        base_ref="main", sender="alice", merged=False) -> dict:
    pr = {
        "url": f"https://api.github.com/repos/vllm-project/vllm/pulls/{number}", "id": 1000 + number,
        "number": number, "state": "closed" if action == "closed" else "open", "title": "Fuse the allreduce",
        "user": {"login": "someone" if fork else "alice"}, "html_url": f"{REPO}/pull/{number}", "draft": draft,
        "merged": merged, "labels": [{"id": i, "name": name, "color": "ededed"} for i, name in enumerate(labels)],
        "head": {"label": "x:perf", "ref": "perf/fuse", "sha": head, "repo": _repo(FORK if fork else REPO, fork)},
        "base": {"label": "vllm-project:main", "ref": base_ref, "sha": BASE_TIP, "repo": _repo(REPO)},
        "author_association": "CONTRIBUTOR" if fork else "MEMBER",
    }
    payload = {"action": action, "number": number, "pull_request": pr, "repository": _repo(REPO),
               "sender": {"login": sender}}
    if label is not None:
        payload["label"] = {"name": label, "color": "ededed"}
    return payload


def github_comment(body="/bench", *, number=12, association="MEMBER", user="bob", on_pull=True) -> dict:
    issue = {"number": number, "title": "Fuse the allreduce", "state": "open", "user": {"login": "someone"}}
    if on_pull:
        issue["pull_request"] = {"url": f"https://api.github.com/repos/vllm-project/vllm/pulls/{number}"}
    return {"action": "created", "issue": issue, "repository": _repo(REPO), "sender": {"login": user},
            "comment": {"id": 77, "body": body, "user": {"login": user}, "author_association": association}}


def github_check_run(action="rerequested", *, name="decode-bench/tiny-a", external_id="1", head=HEAD,
                     number=12, app_slug="decode-bench", identifier=None, sender="carol") -> dict:
    payload = {"action": action, "repository": _repo(REPO), "sender": {"login": sender},
               "check_run": {"id": 555, "name": name, "head_sha": head, "external_id": external_id,
                             "status": "completed", "app": {"id": 1, "slug": app_slug},
                             "pull_requests": [{"number": number, "head": {"sha": head}}]}}
    if identifier is not None:  # a button of the check run (action requested_action)
        payload["requested_action"] = {"identifier": identifier}
    return payload


GITLAB_PROJECT = {"id": 15, "name": "vllm", "web_url": "https://gitlab.com/group/sub/vllm",
                  "git_http_url": "https://gitlab.com/group/sub/vllm.git",
                  "git_ssh_url": "git@gitlab.com:group/sub/vllm.git", "path_with_namespace": "group/sub/vllm"}


def gitlab_merge_request(action="open", *, iid=3, head=HEAD, oldrev=None, fork=False, draft=False, labels=(),
                         previous_labels=None) -> dict:
    attrs = {"id": 99, "iid": iid, "target_branch": "main", "source_branch": "perf/fuse",
             "source_project_id": 16 if fork else 15, "target_project_id": 15, "title": "Fuse the allreduce",
             "state": "opened", "action": action, "draft": draft, "work_in_progress": draft,
             "url": "https://gitlab.com/group/sub/vllm/-/merge_requests/3",
             "source": GITLAB_PROJECT, "target": GITLAB_PROJECT,
             "last_commit": {"id": head, "message": "Fuse", "author": {"name": "Alice"}}}
    if oldrev:
        attrs["oldrev"] = oldrev
    payload = {"object_kind": "merge_request", "event_type": "merge_request", "user": {"username": "alice"},
               "project": GITLAB_PROJECT, "repository": {"name": "vllm", "url": GITLAB_PROJECT["git_ssh_url"],
                                                        "homepage": GITLAB_PROJECT["web_url"]},
               "object_attributes": attrs, "labels": [{"id": i, "title": t} for i, t in enumerate(labels)]}
    if previous_labels is not None:
        payload["changes"] = {"labels": {"previous": [{"title": t} for t in previous_labels],
                                         "current": [{"title": t} for t in labels]}}
    return payload


def gitlab_note(note="/bench", *, iid=3, head=HEAD) -> dict:
    return {"object_kind": "note", "event_type": "note", "user": {"username": "bob"}, "project": GITLAB_PROJECT,
            "object_attributes": {"id": 1244, "note": note, "noteable_type": "MergeRequest"},
            "merge_request": {"iid": iid, "source_branch": "perf/fuse", "target_branch": "main",
                              "last_commit": {"id": head}}}
