"""The chart marks' answer (GET /api/benchmarks/{slug}/marks/) as typed schemas, for the OpenAPI
document: the view answers selectors.chart_marks's dict as it is (test_api_schemas.py checks it)."""
from rest_framework import serializers as s

from runners import contract

from .models import ChangePoint, Verdict


class MarksQuerySerializer(s.Serializer):
    """The query parameters (others are ignored)."""
    metric = s.CharField(required=False, allow_blank=True, default=contract.DECODE_TOK_S,
                         help_text="a metric's name (runners.contract.METRICS); an unknown one is refused (400)")
    point = s.CharField(required=False, allow_blank=True, help_text="a workload point's id; default the runs' first point")


class MarkVerdictSerializer(s.Serializer):
    run = s.IntegerField(help_text="the run's id")
    kind = s.ChoiceField([Verdict.Kind.IMPROVEMENT.value, Verdict.Kind.REGRESSION.value])
    effect = s.FloatField(allow_null=True, help_text="relative change against the baseline, a fraction")
    ci_low = s.FloatField(allow_null=True)
    ci_high = s.FloatField(allow_null=True)
    threshold = s.FloatField(help_text="the smallest change that counts, a fraction")


class MarkChangePointSerializer(s.Serializer):
    id = s.IntegerField()
    run = s.IntegerField(help_text="the run it was found at")
    variant = s.IntegerField(help_text="the variant's id")
    commit = s.CharField()
    change = s.FloatField(allow_null=True, help_text="(after - before) / before")
    status = s.ChoiceField(ChangePoint.Status.values)


class MarksSerializer(s.Serializer):
    benchmark = s.CharField(help_text="the benchmark's slug")
    metric = s.CharField()
    verdicts = MarkVerdictSerializer(many=True, help_text="each judged run's improvement or regression, oldest first")
    change_points = MarkChangePointSerializer(many=True, help_text="oldest first")
