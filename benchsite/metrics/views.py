from django.http import HttpResponse
from django.views.decorators.http import require_GET

from . import access, exposition


@require_GET
def metrics(request):
    refused = access.refusal(request.headers.get("Authorization", ""), request.META.get("REMOTE_ADDR", ""))
    if refused is not None:
        response = HttpResponse(refused.detail + "\n", status=refused.status, content_type="text/plain")
        if refused.status == 401:
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(exposition.metrics_text(), content_type=exposition.CONTENT_TYPE)
