"""GitHub: commit statuses through its REST API, and pull-request checks as a GitHub App."""
from pathlib import Path

from pydantic import field_validator
from pydantic_core import PydanticCustomError

from .fields import WITHOUT_VALUE, CommaList, Group, Url, env


class GitHub(Group):
    title = "GitHub"
    about = ("Check runs need a GitHub App (its id and private key, and the secret of its own webhook). Without an "
             "App, `BENCH_GITHUB_TOKEN` gives a commit status on the pull request's head plus one comment.")

    api_url: Url = env("BENCH_GITHUB_API_URL", "https://api.github.com", "GitHub's REST API; "
                       "`https://HOST/api/v3` for GitHub Enterprise Server")
    hosts: CommaList = env("BENCH_GITHUB_HOSTS", ["github.com"], "comma-separated hosts whose repositories get "
                           "statuses through that API", shown="`github.com`")
    token: str = env("BENCH_GITHUB_TOKEN", "", "a token allowed to write commit statuses; empty: no statuses",
                     repr=False)
    app_id: str = env("BENCH_GITHUB_APP_ID", "", "the GitHub App that creates the pull requests' check runs; "
                      "empty: no App")
    app_private_key: str = env("BENCH_GITHUB_APP_PRIVATE_KEY", "", "the App's private key: PEM text (newlines may "
                               "be written `\\n`), or `@path` to its file", repr=False)
    app_webhook_secret: str = env("BENCH_GITHUB_APP_WEBHOOK_SECRET", "", "the secret of the App's webhook "
                                  "(`check_run` deliveries)", repr=False)

    @field_validator("app_private_key")
    @classmethod
    def _a_usable_key(cls, value: str) -> str:
        if value:
            try:
                read_app_private_key(value)
            except ValueError as exc:
                raise PydanticCustomError(WITHOUT_VALUE, str(exc)) from None
        return value


def read_app_private_key(value: str):
    """The App's RSA private key from VALUE (PEM text, or @path to a .pem file); ValueError saying
    what is wrong, never the key itself."""
    from cryptography.hazmat.primitives.asymmetric import rsa  # only where an App is set up
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    text = _key_text(value.strip())
    try:
        key = load_pem_private_key(text, password=None)
    except (ValueError, TypeError) as exc:
        reason = "it is encrypted" if "password" in str(exc).lower() else "not a PEM private key"
        raise ValueError(f"{reason}; give the App's .pem file as downloaded from GitHub "
                         "(-----BEGIN RSA PRIVATE KEY-----), or @path to it") from None
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError("not an RSA key; GitHub Apps sign with RS256")
    return key


def _key_text(value: str) -> bytes:
    if value.startswith("@"):
        path = Path(value[1:]).expanduser()
        try:
            return path.read_bytes()
        except OSError as exc:
            raise ValueError(f"cannot read {path}: {exc.strerror}") from None
    if "\n" not in value:  # one line in an env file: newlines written as \n
        value = value.replace("\\n", "\n")
    return value.encode()
