"""The JSON API on Django REST framework, answering as the hand-written views did: the same bytes,
the same errors and the same order of checks (the method, the rate limit, then the token).
answers.py: the renderer, content negotiation and errors (settings.REST_FRAMEWORK); views.py: the
base view. The OpenAPI document is drf-spectacular's (settings.SPECTACULAR_SETTINGS)."""
