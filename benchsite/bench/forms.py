from django import forms
from django.core.validators import RegexValidator

from .models import Benchmark

COMMIT_VALIDATOR = RegexValidator(r"^[0-9a-f]{7,40}$", "A commit is 7 to 40 hexadecimal characters.")


class VariantChoiceField(forms.ModelMultipleChoiceField):
    def label_from_instance(self, obj):
        return f"{obj.position}. {obj.name}"


class TriggerForm(forms.Form):
    """Start one run per chosen variant of one benchmark (all variants checked by default)."""

    variants = VariantChoiceField(
        queryset=None,
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": "Choose at least one variant."},
    )
    commit = forms.CharField(
        required=False,
        max_length=40,
        strip=True,
        help_text="Optional engine commit (7-40 hex characters); empty: the benchmark's default.",
        widget=forms.TextInput(attrs={"placeholder": "e.g. 3f2a9c1", "size": 42, "spellcheck": "false"}),
    )

    def __init__(self, *args, benchmark: Benchmark, **kwargs):
        super().__init__(*args, **kwargs)
        self.benchmark = benchmark
        # Only this benchmark's variants are valid choices: another benchmark's id is rejected.
        qs = benchmark.variants.order_by("position")
        self.fields["variants"].queryset = qs
        if not self.is_bound:
            self.fields["variants"].initial = [v.pk for v in qs]

    def clean_commit(self):
        commit = self.cleaned_data["commit"].lower()
        if commit:
            COMMIT_VALIDATOR(commit)
        return commit
