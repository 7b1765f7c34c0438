"""`manage.py api_token_create USER NAME`: a bearer token for the JSON API, printed once."""
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from benchsite.integrations import tokens


class Command(BaseCommand):
    help = "Create an API token for USER; the token is printed once and only its hash is stored."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("name", help="what the token is for, e.g. 'ci-vllm'")

    def handle(self, *args, username, name, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r}")
        _, raw = tokens.api_token_create(user=user, name=name)
        self.stdout.write(raw)
