"""Labels and number formats (benchsite/bench/domain/units.py), the template filters over them, and how
a took-effect report reads (defaults the variant did not ask for are information)."""
import pytest
from django.template import Context, Template

from benchsite.bench.domain import units
from benchsite.bench.lifecycle.tookeffect import took_effect_view
from runners import contract


@pytest.mark.parametrize("metric, value, text", [
    ("allreduce_share", 0.084778, "8.5%"),
    ("allreduce_share_analytic", 0.23202, "23.2%"),
    ("weight_bytes_per_gpu", 4.5168e7, "45.2 MB"),
    ("weight_bytes_per_gpu", 7113822832.0, "7.11 GB"),
    ("weight_bytes_per_gpu", 512, "512 B"),
    ("allreduce_us_per_call", 4.064, "4.064 us"),
    ("allreduce_us_per_call", 1520.0, "1.52 ms"),
    ("ttft_ms", 24.536, "24.54 ms"),
    ("itl_ms_p50", 0.289, "289 us"),
    ("launch_gap_ms", 10.9648, "10.96 ms"),
    ("decode_tok_s", 293.189, "293.2 tok/s"),
    ("decode_tok_s", 12345.6, "12346 tok/s"),
    ("mem_bandwidth_gb_s", 4258.79, "4259 GB/s"),
    ("allreduce_calls_per_step", 65.0, "65"),
    ("correct", 1.0, "yes"),
    ("correct", 0.0, "no"),
    ("decode_tok_s", None, "–"),
])
def test_metric_text(metric, value, text):
    assert units.metric_text(metric, value) == text


def test_every_registry_metric_has_a_label_and_a_format():
    for name, metric in contract.METRICS.items():
        assert units.metric_label(name) == metric.label and "_" not in units.metric_label(name)
        assert units.metric_text(name, 1.0)
    assert units.metric_label("not_a_metric") == "not_a_metric"


def test_changes_intervals_and_deltas():
    assert units.change_text(0.153) == "+15.3%"
    assert units.change_text(-0.02) == "\u22122.0%"
    assert units.interval_text(-0.933, -0.848) == "[\u221293.3%, \u221284.8%]"
    assert units.interval_text(None, 0.1) == "–"
    assert units.delta_text("allreduce_share", 0.012) == "+1.2 pp"  # a difference of shares: points, not %
    assert units.delta_text("decode_tok_s", -21.9) == "\u221221.9 tok/s"
    assert units.delta_text("itl_ms_p50", 0.25) == "+250 us"


def test_chart_display_says_the_unit_and_the_factor():
    assert units.chart_display("allreduce_share") == {"label": "allreduce share of a decode step", "unit": "%",
                                                      "scale": 100}
    assert units.chart_display("decode_tok_s") == {"label": "decode throughput", "unit": "tok/s", "scale": 1}
    assert units.axis_title("allreduce_share") == "allreduce share of a decode step (%)"


def test_template_filters_use_the_same_formats():
    html = Template("{% load bench_format %}{{ m|metric_label }}: {{ v|metric_value:m }}, {{ d|metric_delta:m }}, "
                    "{{ ms|time_ms }}").render(Context({"m": "allreduce_share", "v": 0.0848, "d": -0.01, "ms": 3.4107}))
    assert html == "allreduce share of a decode step: 8.5%, \u22121.0 pp, 3.411 ms"


def _check(setting, verdict, source):
    return {"setting": setting, "asked": "on", "effective": "off", "verdict": verdict, "source": source,
            "flag": verdict in ("not applied", "superseded") and source == "variant", "evidence": [], "why": ""}


def test_defaults_the_variant_did_not_ask_for_are_information():
    # eager on 2 x H200: the execution mode applied; two fusions on by default did not run
    eager = {"checks": [_check("execution mode", "applied", "variant"),
                        _check("fusion act_quant", "not applied", "default"),
                        _check("fusion allreduce_rms", "not applied", "default")],
             "summary": "1 applied, 2 not applied"}
    view = took_effect_view(eager)
    assert view["summary"] == "1 applied; 2 defaults not asked for (information)"
    assert view["tone"] == "ok" and not view["flagged"]
    assert [c["setting"] for c in view["defaults"]] == ["fusion act_quant", "fusion allreduce_rms"]

    ll = {"checks": [_check("NCCL_PROTO", "superseded", "variant"), _check("custom allreduce", "applied", "variant")]}
    view = took_effect_view(ll)
    assert view["tone"] == "bad" and view["flagged_settings"] == ["NCCL_PROTO"]
    assert view["summary"] == "1 superseded, 1 applied"
    assert took_effect_view({}) is None and took_effect_view(None) is None
    only_defaults = took_effect_view({"checks": [_check("fusion allreduce_rms", "unverified", "default")]})
    assert only_defaults["summary"] == "nothing asked; 1 default not asked for (information)"
    assert only_defaults["tone"] == "muted"


@pytest.mark.django_db
def test_the_run_page_lists_defaults_apart(client):
    import uuid

    from benchsite.bench.models import Benchmark, Run, Variant

    benchmark = Benchmark.objects.create(name="b", slug="b", model="m", tensor_parallel_size=2)
    variant = Variant.objects.create(benchmark=benchmark, position=1, name="eager", flags=["--enforce-eager"])
    run = Run.objects.create(benchmark=benchmark, variant=variant, batch=uuid.uuid4(), state="SUCCEEDED", took_effect={
        "checks": [_check("execution mode", "applied", "variant"), _check("fusion act_quant", "not applied", "default")],
        "summary": "1 applied, 1 not applied"})
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'class="ok" id="took-effect-summary">· 1 applied; 1 default not asked for (information)' in html
    assert "Defaults the variant did not ask for (information)" in html
    default_row = html.split('class="default-setting"')[1].split("</tr>")[0]
    assert "fusion act_quant" in default_row and 'class="muted">not applied' in default_row


def test_ranges_give_the_unit_once():
    assert units.range_text("decode_tok_s", 296.9, 298.9) == "296.9 – 298.9 tok/s"
    assert units.range_text("allreduce_share", 0.081, 0.09) == "8.1% – 9.0%"
    assert units.range_text("ttft_ms", 0.25, 1.2) == "250 us – 1.2 ms"
    assert units.delta_text("correct", 0.0) == "same" and units.delta_text("correct", -1.0) == "became incorrect"


def test_a_verdict_reads_with_its_label_and_interval():
    assert units.verdict_text("decode_tok_s", -0.918, -0.933, -0.848) == \
        "decode throughput \u221291.8% [\u221293.3%, \u221284.8%]"
    assert units.verdict_text("itl_ms_p99", 0.12) == "inter-token latency p99 +12.0%"
