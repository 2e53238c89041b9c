# podgroup-operator: `podgroup-operator run` in a slim image, as a non-root user.
#
# The base image is pinned by digest, so a rebuild gets the same bytes. The digest below is the
# one two unrelated public projects pin for python:3.11-slim (a multi-arch index); it could not be
# checked against Docker Hub from where this file was written. Check it, and move it forward on
# purpose (security fixes), with:
#   docker buildx imagetools inspect python:3.11-slim    # "Digest:" of the index
# or build with another one:
#   docker build --build-arg PYTHON_IMAGE=python:3.11-slim@sha256:<digest> .
ARG PYTHON_IMAGE=python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY operator ./operator
RUN pip install --no-cache-dir --upgrade pip \
 && pip wheel --no-cache-dir --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
# Set at build time, e.g. --build-arg REVISION=$(git rev-parse HEAD)
#   --build-arg CREATED=$(date -u +%Y-%m-%dT%H:%M:%SZ) --build-arg SOURCE=<repository URL>
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
ARG SOURCE=unknown
LABEL org.opencontainers.image.title="podgroup-operator" \
      org.opencontainers.image.description="Gang scheduling for Kubernetes: the PodGroup resource, its lifecycle, quota reservation and all-or-nothing placement." \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.base.name="docker.io/library/python:3.11-slim"
RUN groupadd --system --gid 10001 podgroup \
 && useradd --system --uid 10001 --gid 10001 --no-create-home podgroup
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/* && rm -rf /wheels
# numeric, so that Kubernetes can verify runAsNonRoot (deploy/base/deployment.yaml)
USER 10001:10001
EXPOSE 8080 8081 9443
# In a cluster: webhooks served on :9443 with the certificate in /etc/podgroup-operator/tls
# (mounted from a Secret, or written by the operator with deploy/overlays/self-managed),
# Kopf's liveness endpoint on :8080/healthz, and /metrics, /readyz, /livez on :8081 (the
# Deployment's readiness and liveness probes).
ENTRYPOINT ["podgroup-operator", "run"]
CMD ["--webhooks", "cluster", "--liveness", "http://0.0.0.0:8080/healthz", "--metrics-address", "0.0.0.0:8081"]
