"""Helpers the web tests share."""
import html
import re


def hidden_fields(page: str) -> dict:
    """The trigger review page's hidden inputs (what its confirm button posts), by name."""
    form = page[page.index('class="trigger-confirm"'):]
    fields = {}
    for name, value in re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', form):
        if name != "csrfmiddlewaretoken":
            fields.setdefault(name, []).append(html.unescape(value))
    return fields
