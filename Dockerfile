# Web side: Django (gunicorn) and the web-queue Celery worker. No GPU, no vLLM.
FROM python:3.12-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml ./
COPY benchsite ./benchsite
COPY runners ./runners
COPY templates ./templates
COPY static ./static
COPY manage.py ./
RUN pip install '.[web]' && python manage.py collectstatic --noinput
EXPOSE 8000
CMD ["gunicorn", "benchsite.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3"]
