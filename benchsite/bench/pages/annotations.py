"""Annotations on a benchmark's history: the form a member fills in and the write."""
from __future__ import annotations

import re

from django import forms

from ..models import Annotation, Benchmark

_COMMIT_RE = re.compile(r"^[0-9a-f]{4,64}$")


class AnnotationForm(forms.Form):
    """A note at one commit, or over a date range (an open end: from that date on)."""

    text = forms.CharField(max_length=200, widget=forms.TextInput(attrs={"placeholder": "e.g. enabled CUDA graphs", "size": 36}))
    commit = forms.CharField(required=False, max_length=64, strip=True,
                             widget=forms.TextInput(attrs={"placeholder": "commit (prefix)", "size": 14, "spellcheck": "false"}))
    starts_at = forms.DateTimeField(required=False, label="from",
                                    widget=forms.DateTimeInput(attrs={"type": "datetime-local"}))
    ends_at = forms.DateTimeField(required=False, label="to",
                                  widget=forms.DateTimeInput(attrs={"type": "datetime-local"}))

    def clean_commit(self):
        commit = self.cleaned_data["commit"].lower()
        if commit and not _COMMIT_RE.match(commit):
            raise forms.ValidationError("A commit is 4 to 64 hex characters.")
        return commit

    def clean(self):
        data = super().clean()
        commit, starts, ends = data.get("commit"), data.get("starts_at"), data.get("ends_at")
        if bool(commit) == bool(starts):
            raise forms.ValidationError("Give either a commit or a start date (with an optional end date).")
        if ends and not starts:
            raise forms.ValidationError("An end date needs a start date.")
        if starts and ends and ends < starts:
            raise forms.ValidationError("The end date is before the start date.")
        return data


def annotation_create(*, benchmark: Benchmark, user, text: str, commit: str = "", starts_at=None, ends_at=None) -> Annotation:
    return Annotation.objects.create(benchmark=benchmark, created_by=user, text=text, commit=commit,
                                     starts_at=starts_at, ends_at=ends_at)
