# The planner image: `intent-planner` as the entrypoint (run, serve, operator, ...).
#   docker build -t intent-planner:latest .                  # the planner (last stage)
#   docker build --target jupyter -t intent-planner-jupyter .  # + JupyterLab for notebooks/
FROM python:3.11-slim AS planner

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
# Dependencies first (cached while only the sources change).
COPY pyproject.toml README.md constraints.txt ./
COPY planner ./planner
COPY actuators ./actuators
COPY knowledge ./knowledge
COPY simulator ./simulator
RUN pip install -c constraints.txt . \
    && groupadd --gid 65532 planner \
    && useradd --uid 65532 --gid 65532 --create-home --shell /usr/sbin/nologin planner
COPY examples ./examples

# The API listens on all interfaces inside the container; the scenario ships in the image.
ENV INTENT_PLANNER_HOST=0.0.0.0 \
    INTENT_PLANNER_PORT=8080 \
    INTENT_PLANNER_SCENARIO=/app/examples/scenarios/diurnal-shop.yaml

USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["intent-planner"]
CMD ["run", "--api", "--no-live", "--scenario", "/app/examples/scenarios/diurnal-shop.yaml"]


# JupyterLab with the planner installed, for notebooks/ (mounted by docker-compose.yml).
FROM planner AS jupyter
USER root
RUN pip install jupyterlab ipykernel nbformat nbclient matplotlib
COPY notebooks ./notebooks
RUN mkdir -p /app/docs/img && chown -R 65532:65532 /app/notebooks /app/docs
USER 65532:65532
EXPOSE 8888
ENTRYPOINT ["jupyter", "lab", "--ip=0.0.0.0", "--port=8888", "--no-browser", \
            "--ServerApp.root_dir=/app/notebooks"]
CMD []


# Default target: the planner.
FROM planner
