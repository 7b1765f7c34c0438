"""Compressed responses: pages and JSON go out gzip-compressed to a client that accepts it (a
100,000-run chart is ~10x smaller); streamed artifact downloads are left as they are."""
from django.middleware.gzip import GZipMiddleware


class PageGZipMiddleware(GZipMiddleware):
    """Django's GZipMiddleware (BREACH-mitigated, honours Accept-Encoding and Vary), except for
    streaming responses: an artifact of hundreds of MB keeps its Content-Length and costs the web
    worker no CPU to compress, and a profiler trace or .gz file would not shrink anyway."""

    def process_response(self, request, response):
        if response.streaming:
            return response
        return super().process_response(request, response)
