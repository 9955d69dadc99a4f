# syntax=docker/dockerfile:1
#
# Pitfalls images. Two targets:
#
#   docker build --target web    -t pitfalls-web .      the app: FastAPI + SQLite, no torch (~200 MB)
#   docker build --target worker -t pitfalls-worker .   a sandbox worker: official PyTorch CUDA runtime
#
# docker-compose.yml builds both. The build needs only the base images and PyPI; nothing at run
# time needs the internet (htmx is served from the image). See docs/self-hosting.md.
#
# Base images are pinned by tag; to pin by digest as well, pass e.g.
#   --build-arg PYTHON_IMAGE=python:3.11.14-slim-bookworm@sha256:...
# The worker's CUDA 12.8 build of torch needs an NVIDIA driver >= 570 (R570) on the host, or >= 525
# through CUDA minor-version compatibility; for older drivers build with
#   --build-arg TORCH_IMAGE=pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm
ARG TORCH_IMAGE=pytorch/pytorch:2.9.1-cuda12.8-cudnn9-runtime

# ---------------------------------------------------------------------------------------------
# web-deps: the web tier's dependencies, read from pyproject.toml alone, so this layer is rebuilt
# only when the dependencies change, not on every source edit.
FROM ${PYTHON_IMAGE} AS web-deps
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
COPY pyproject.toml ./
# `[project].dependencies` and the `postgres` extra (the psycopg driver, for the compose `postgres`
# profile): no torch (an optional extra for workers), no test tools.
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; print('\n'.join(p['dependencies'] + p['optional-dependencies']['postgres']))" \
        > /tmp/requirements.txt \
    && pip install --no-cache-dir -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

# ---------------------------------------------------------------------------------------------
# web: `pitfalls serve` on 0.0.0.0:8000; migrations and the content sync run at start.
FROM ${PYTHON_IMAGE} AS web
LABEL org.opencontainers.image.title="pitfalls-web" \
      org.opencontainers.image.description="Pitfalls web service: search PyTorch errors, read the fix, queue reproductions" \
      org.opencontainers.image.licenses="MIT"
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PITFALLS_DATABASE_URL=sqlite:////data/pitfalls.db \
    PITFALLS_CONTENT_DIR=/app/content \
    PITFALLS_LOCAL_WORKERS=0 \
    PITFALLS_HTMX_LOCAL=true
RUN groupadd --system --gid 10001 pitfalls \
    && useradd --system --uid 10001 --gid pitfalls --home-dir /app --no-create-home --shell /usr/sbin/nologin pitfalls \
    && mkdir -p /data \
    && chown pitfalls:pitfalls /data
COPY --from=web-deps /opt/venv /opt/venv
WORKDIR /app
COPY pyproject.toml ./
COPY migrations/ migrations/
COPY content/ content/
COPY app/ app/
# Editable install: puts the `pitfalls` command on PATH and keeps `app/` next to `migrations/`,
# where `app.db` looks for them. --no-deps: the dependencies are already in /opt/venv.
RUN pip install --no-cache-dir --no-deps -e . \
    && python -c "import app.main, app.cli" \
    && ! python -c "import torch" 2>/dev/null
USER 10001:10001
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status == 200 else 1)"]
CMD ["pitfalls", "serve", "--host", "0.0.0.0", "--port", "8000"]

# ---------------------------------------------------------------------------------------------
# worker: pulls jobs from the web service over HTTP and runs snippets in its sandbox. The sandbox
# package needs only the standard library and torch, so only `app/sandbox` is copied in.
FROM ${TORCH_IMAGE} AS worker
LABEL org.opencontainers.image.title="pitfalls-worker" \
      org.opencontainers.image.description="Pitfalls sandbox worker: runs entries' snippets with CUDA torch" \
      org.opencontainers.image.licenses="MIT"
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONPATH=/app \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTORCH_NVML_BASED_CUDA_CHECK=1 \
    HOME=/tmp/pitfalls \
    XDG_CACHE_HOME=/tmp/pitfalls/.cache \
    PITFALLS_SERVER=http://web:8000 \
    PITFALLS_WORKER_CONCURRENCY=2 \
    PITFALLS_WORKER_SPARE=2
# Packages some entries declare in `requires.packages` (ONNX export, numpy interop); see the file.
COPY scripts/worker-requirements.txt /tmp/worker-requirements.txt
RUN pip install --no-cache-dir -r /tmp/worker-requirements.txt \
    && rm /tmp/worker-requirements.txt \
    && groupadd --system --gid 10001 pitfalls \
    && useradd --system --uid 10001 --gid pitfalls --home-dir /tmp/pitfalls --no-create-home --shell /usr/sbin/nologin pitfalls
WORKDIR /app
COPY app/__init__.py app/__init__.py
COPY app/sandbox/ app/sandbox/
RUN python -c "import app.sandbox.agent"
USER 10001:10001
# The token is read from PITFALLS_WORKER_TOKEN in the environment, not passed as --token: a command
# line is visible to every user of the host (`ps`), the environment of another user's process is not.
CMD ["sh", "-c", "exec python -m app.sandbox.agent --server \"$PITFALLS_SERVER\" --concurrency \"$PITFALLS_WORKER_CONCURRENCY\" --spare \"$PITFALLS_WORKER_SPARE\""]
