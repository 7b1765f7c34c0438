"""Render pages of the database in DATABASE_URL as an anonymous visitor, printed as JSON
{path: [status, body]}: `python -m tests.deploy.render_pages / /b/slug/ ...` (the backup test
reads the restored database this way: a process of its own, as a restored service would be)."""
import json
import os
import sys


def main(paths: list[str]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
    import django

    django.setup()
    from django.test import Client

    client = Client()
    pages = {}
    for path in paths:
        response = client.get(path)
        pages[path] = [response.status_code, response.content.decode()]
    json.dump(pages, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
