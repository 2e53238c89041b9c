# podgroup-operator: `podgroup-operator run` in a slim image, as a non-root user.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator ./operator
RUN pip install --no-cache-dir --upgrade pip \
 && pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
RUN useradd --system --uid 10001 --no-create-home podgroup
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/* && rm -rf /wheels
USER 10001
EXPOSE 8080 9443
# In a cluster: webhooks served on :9443 with the certificate mounted at /etc/podgroup-operator/tls
# (see deploy/), liveness on :8080/healthz.
ENTRYPOINT ["podgroup-operator", "run"]
CMD ["--webhooks", "cluster", "--liveness", "http://0.0.0.0:8080/healthz"]
