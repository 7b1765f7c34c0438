import base64
import binascii

from django import forms

from runners.contract import MAX_PATCH_BYTES, SpecError, check_ref

from ..models import Benchmark, EngineSource, Run


class VariantChoiceField(forms.ModelMultipleChoiceField):
    def label_from_instance(self, obj):
        return f"{obj.position}. {obj.name}"


class TriggerForm(forms.Form):
    """Start one run per chosen variant of one benchmark (all variants checked by default), at
    an engine ref (the worker resolves it to a commit) with an optional uploaded patch."""

    variants = VariantChoiceField(
        queryset=None,
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": "Choose at least one variant."},
    )
    ref = forms.CharField(
        required=False,
        max_length=250,
        strip=True,
        label="Engine ref",
        help_text="Optional branch, tag or commit of the benchmark's engine repository; empty: its default.",
        widget=forms.TextInput(attrs={"placeholder": "e.g. main, v0.32.0, 3f2a9c1", "size": 42, "spellcheck": "false"}),
    )
    repeats = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=Run.MAX_REPEATS,
        help_text="Optional timed repeats per run; empty: the benchmark's.",
        error_messages={"invalid": "Repeats is a whole number.",
                        "min_value": "At least 1 repeat.",
                        "max_value": f"At most {Run.MAX_REPEATS} repeats per run (one run must fit the benchmark's time limit)."},
        widget=forms.NumberInput(attrs={"min": 1, "max": Run.MAX_REPEATS, "step": 1}),
    )
    patch = forms.FileField(
        required=False,
        help_text="Optional unified diff (git diff) applied on top of the variant's patches; at most 1 MiB.",
    )
    # The confirm page carries an uploaded patch back as base64 (a file input cannot be refilled,
    # and a form field's newlines would be rewritten as CRLF); checked again like an upload.
    patch_name = forms.CharField(required=False, max_length=200, widget=forms.HiddenInput)
    patch_b64 = forms.CharField(required=False, max_length=MAX_PATCH_BYTES * 2, widget=forms.HiddenInput)

    def __init__(self, *args, benchmark: Benchmark, **kwargs):
        super().__init__(*args, **kwargs)
        self.benchmark = benchmark
        # Only this benchmark's variants are valid choices: another benchmark's id is rejected.
        qs = benchmark.variants.order_by("position")
        self.fields["variants"].queryset = qs
        if not self.is_bound:
            self.fields["variants"].initial = [v.pk for v in qs]
        self.fields["repeats"].widget.attrs["placeholder"] = str(benchmark.repeats)

    def clean_ref(self):
        ref = self.cleaned_data["ref"]
        if not ref:
            return ref
        source = self.benchmark.engine_source
        if source is None or source.kind != EngineSource.Kind.GIT:
            raise forms.ValidationError("This benchmark runs the worker's installed engine: it has no repository "
                                        "to take a ref from.")
        try:
            return check_ref(ref)
        except SpecError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_patch(self):
        upload = self.cleaned_data["patch"]
        if not upload:
            return None
        if upload.size > MAX_PATCH_BYTES:
            raise forms.ValidationError(f"The patch is {upload.size} bytes; the limit is {MAX_PATCH_BYTES} (1 MiB).")
        return _check_patch(upload.name, upload.read())

    def clean(self):
        cleaned = super().clean()
        if not cleaned.get("patch") and cleaned.get("patch_b64") and "patch" not in self.errors:
            try:
                raw = base64.b64decode(cleaned["patch_b64"], validate=True)
            except (binascii.Error, ValueError):
                raise forms.ValidationError({"patch": "The carried patch is not base64; upload it again."}) from None
            if len(raw) > MAX_PATCH_BYTES:
                raise forms.ValidationError({"patch": f"The patch is {len(raw)} bytes; the limit is {MAX_PATCH_BYTES}."})
            try:
                cleaned["patch"] = _check_patch(cleaned.get("patch_name") or "patch.diff", raw)
            except forms.ValidationError as exc:
                raise forms.ValidationError({"patch": exc.messages}) from None
        return cleaned


def _check_patch(name: str, raw: bytes) -> dict:
    try:
        content = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise forms.ValidationError("The patch is not UTF-8 text (binary patches are not supported).") from None
    if not ("\n+++ " in content and "\n@@ " in content):
        raise forms.ValidationError("The file is not a unified diff (no '+++' file header and '@@' hunk).")
    return {"name": name[:200], "content": content}
