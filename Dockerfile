# The step and watcher image: `nvcre-argo` on a slim Python base, as a non-root user.
# Build: docker build -t <your-registry>/nvcre-argo:0.1.0 .   then compile with --step-image <that tag>.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY nvcre_argo ./nvcre_argo
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11-slim
COPY --from=build /install /usr/local
# 65532 matches the runAsUser the compiled Workflows and the install manifests set.
RUN groupadd --gid 65532 nvcre && useradd --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin nvcre
USER 65532:65532
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
ENTRYPOINT ["nvcre-argo"]
