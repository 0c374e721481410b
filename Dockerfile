# Supercluster Twin image: one image for web (uvicorn), worker and beat (celery),
# the migrate step and the telemetry agent; docker-compose.yml picks the command.
#
# Stage "python" installs the app and writes its OpenAPI schema; "frontend" builds
# the dashboard with Node (its API types generated from that schema); "app" is the
# Python app with the built assets collected by whitenoise. No secret is baked in:
# TWIN_SECRET_KEY comes from the environment at run time (the schema and
# collectstatic steps run with a throwaway key).

FROM python:3.11-slim-bookworm AS python
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DJANGO_SETTINGS_MODULE=twin.settings \
    TWIN_VAR_DIR=/app/var
WORKDIR /app
# Dependencies first (cached while only code changes); editable so that
# BASE_DIR stays /app, where frontend/dist and staticfiles/ live.
COPY pyproject.toml README.md ./
COPY twin/ ./twin/
COPY simulation/ ./simulation/
COPY manage.py ./
RUN pip install -e . \
    && useradd --system --home-dir /app --shell /usr/sbin/nologin twin
# The OpenAPI schema the frontend's TypeScript types are generated from: written
# from the code (no server, no Redis: REDIS_URL only keeps settings from starting one).
RUN TWIN_ALLOW_INSECURE_KEY=1 REDIS_URL=redis://build-only:6379/0 \
        python manage.py spectacular --format openapi-json --file /app/openapi.json

FROM node:20-bookworm-slim AS frontend
WORKDIR /src/frontend
COPY frontend/package.json frontend/package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY frontend/ ./
COPY --from=python /app/openapi.json ./openapi.json
RUN npm run build

FROM python AS app
COPY --from=frontend /src/frontend/dist ./frontend/dist
# REDIS_URL is set so settings do not start the embedded Redis during the build.
RUN TWIN_ALLOW_INSECURE_KEY=1 REDIS_URL=redis://build-only:6379/0 \
        python manage.py collectstatic --noinput -v 0 \
    && mkdir -p /app/var \
    && chown -R twin /app/var
USER twin
EXPOSE 8000
CMD ["uvicorn", "twin.asgi:application", "--host", "0.0.0.0", "--port", "8000", "--lifespan", "off", \
     "--workers", "2"]
