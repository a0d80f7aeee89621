"""LongDoc's settings: one object, read from `LONGDOC_*` environment variables and `.env`.

Only entry points (the CLI, the worker, the UI) call `get_settings()`; services take explicit
arguments so they can be tested without touching the environment.

Entry points call `load_settings()`: a bad `LONGDOC_*` value becomes InvalidSettings with one
sentence, the same in the CLI and the UI.

`environment` is "development" or "production". Production refuses unsafe defaults: today the
one secret, the UI password, must be set there (`_production_needs_a_ui_password`).
"""

from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.errors import InvalidSettings

DEFAULT_MODEL = "smollm2-135m-instruct"
MIB = 1024 * 1024
# The longest question and search the services take (app/services/questions.py), in characters
# as typed; the UI's text boxes stop at the same lengths.
MAX_QUESTION_CHARS = 2000
MAX_SEARCH_CHARS = 500
UI_PASSWORD_HASH_PATTERN = r"^(|pbkdf2_sha256\$[0-9]+\$[A-Za-z0-9+/=_-]+\$[A-Za-z0-9+/=_-]+)$"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="LONGDOC_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        validate_default=True,
    )

    environment: Literal["development", "production"] = "development"
    data_dir: Path = Path("./var")
    # The three below default to places inside data_dir; see `_fill_paths_from_data_dir`.
    database_url: str = Field(default="", description="Default: sqlite:///<data_dir>/longdoc.db")
    files_dir: Path = Field(default=Path(), description="Uploaded PDFs, stored by content hash.")
    model_cache_dir: Path = Field(default=Path(), description="Converted model weights.")
    # "smollm2-135m-instruct" is the packaged GGUF; otherwise a path to an HF checkpoint folder
    # or to a .gguf file.
    model: str = DEFAULT_MODEL
    max_upload_bytes: int = Field(default=200 * MIB, gt=0)
    max_pages: int = Field(default=2000, gt=0)
    parse_timeout_s: float = Field(default=120.0, gt=0)
    parse_memory_mb: int = Field(default=2048, gt=0)
    # Text a PDF may give, decided in the parse child; past either, the file is refused (a few
    # KB can inflate into megabytes of text: pipelines/ingest/text_caps.py).
    max_page_chars: int = Field(default=100_000, gt=0)
    max_document_chars: int = Field(default=10_000_000, gt=0)
    passage_max_tokens: int = Field(default=384, gt=0)
    # OCR of pages without a usable text layer (pipelines/ingest/page_sources.py), in the parse child.
    # Off: a document with no text layer is refused, and scanned pages of a mixed one stay empty.
    ocr_enabled: bool = True
    ocr_dpi: int = Field(default=200, ge=72, le=600)  # pages are rendered at this for OCR
    ocr_page_timeout_s: float = Field(default=60.0, gt=0)  # past it, the page is left empty
    ocr_num_threads: int = Field(default=2, gt=0)  # onnxruntime's threads in the parse child
    # Bad redactions (dark boxes over text still in the file) and invisible text (white on white,
    # tiny, off the page, clipped, in a hidden layer), pipelines/ingest/redactions.py: found at
    # ingest; their text is left out of the stored pages unless keep_hidden_text is set (for a
    # reviewer who must see what the filer failed to hide).
    redaction_check_enabled: bool = True
    keep_hidden_text: bool = False
    # The sentence-embedding model of hybrid retrieval (worker/model/embedder.py), shipped in a PyPI
    # package; "none" ranks passages by BM25 alone.
    embedding_model: str = "all-minilm-l6-v2"

    # --- Background work (worker/celery_app.py) ---
    # "" means the embedded broker: kombu's filesystem transport under data_dir/broker (no server
    # to run; bench/results/embedded_broker.md says why not SQLAlchemy-on-SQLite). Production:
    # redis://host:6379/0.
    broker_url: str = ""
    # "" means the database above (Celery's `db+` backend); job rows stay the source of truth.
    result_backend: str = ""
    # Longest a task may run before it is stopped; soft limits come a minute earlier.
    ingest_time_limit_s: float = Field(default=30 * 60, gt=0)
    model_time_limit_s: float = Field(default=4 * 3600, gt=0)
    # How long Redis waits for an unacknowledged task before giving it to another worker. Must
    # exceed the longest task (None: model_time_limit_s + 10 minutes), else it runs twice.
    visibility_timeout_s: float | None = Field(default=None, gt=0)
    # A job whose worker process dies under it this many times is failed, never run again.
    max_worker_deaths: int = Field(default=2, gt=0)
    # A prefork pool child that died: how long its parent waits for a result it may have sent
    # before reporting the task lost and putting it back (Celery's worker_lost_wait).
    worker_lost_wait_s: float = Field(default=10.0, gt=0)
    inbox_dir: Path = Field(default=Path(), description="Default: <data_dir>/inbox")
    inbox_scan_enabled: bool = True
    inbox_scan_interval_s: float = Field(default=300, gt=0)
    # Files in inbox/processed/ and inbox/refused/ older than this are deleted at each scan.
    inbox_keep_days: float = Field(default=30, ge=0)
    auto_summarize_enabled: bool = True
    # A key-facts job follows every newly stored document, however it came in (upload, inbox,
    # `longdoc ingest`); false: none (extract them later with `longdoc facts ID --run`).
    key_facts_after_ingest: bool = True
    auto_summarize_interval_s: float = Field(default=600, gt=0)

    # --- The engine (worker/model/engine_holder.py) ---
    # The choices below are engine/config.py's (DTYPES, OOM_POLICIES, ATTENTION_BACKENDS, WEIGHTS,
    # KV_DTYPES), written out because app imports no engine; tests/worker/model/
    # test_engine_holder.py keeps them equal.
    engine_device: str = Field(default="auto", pattern=r"^(auto|cpu|cuda(:[0-9]+)?)$")
    engine_dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    engine_chunk_size: int | None = Field(default=None, gt=0)  # None: planned from free memory
    engine_oom_policy: Literal["fail", "truncate", "cpu"] = "fail"
    engine_max_kv_cache_bytes: int | None = Field(default=None, gt=0)
    engine_num_threads: int | None = Field(default=None, gt=0)  # CPU threads; None: torch's
    # "auto": flash-attn 4/2, else cuDNN, else flex on a GPU; our AVX-512 kernel, else SDPA on a CPU.
    engine_attention_backend: Literal[
        "auto", "flash_attn", "cudnn", "flex", "cpu_flash", "sdpa"
    ] = "auto"
    # torch.compile the layers on a GPU (a minute of compiling on the first requests, then a
    # 32K prefill ~10% faster on an H200: bench/results/prefill_h200.md); ignored on a CPU.
    engine_compile: bool = False
    # FP8 (E4M3) on Hopper-class GPUs (engine/models/fp8.py, engine/attention/fp8_kv.py):
    # "fp8" weights quantize a bf16 checkpoint's projections at load (FP8 checkpoints load as
    # FP8 either way); an "fp8" KV cache holds twice the tokens in the same memory.
    engine_weights: Literal["auto", "fp8"] = "auto"
    engine_kv_dtype: Literal["auto", "fp8"] = "auto"
    # FP8 weights, decode steps of 2-64 requests: activations rounded to E4M3 (a scale per 128
    # inputs) for FP8 tensor cores, as prefill's products do per token; false keeps them bf16
    # (exact activations, slower decode at many requests).
    engine_fp8_w8a8_decode: bool = True
    # With the FP8 KV cache and the cudnn attention backend on a Hopper or newer GPU, long prefill
    # chunks attend in FP8 through cuDNN (needs the nvidia-cudnn-frontend wheel); false attends in
    # the model's dtype (more exact).
    engine_fp8_attention: bool = False
    # Programmatic dependent launch on Hopper or newer: decode's kernels start while the one
    # before them finishes (and torch.compile's with engine_compile); false: one after another.
    engine_pdl: bool = True
    # Batching: requests the engine runs at once, and how long an idle engine waits for
    # companions before it starts (seconds, at most 0.05).
    engine_max_num_seqs: int = Field(default=64, gt=0)
    engine_admission_window_s: float = Field(default=0.010, ge=0, le=0.05)
    # KV tiers below the engine's GPU prefix cache (engine/kv_tiers/): a document's KV outlives
    # the worker, so a question after a restart loads it instead of reading the document again.
    # CPU memory per worker process (0: none), and files under kv_disk_tier_dir shared by the
    # workers of this machine, LRU-evicted past kv_disk_tier_bytes; kv_disk_tier_enabled=false
    # keeps nothing on disk. Deleting a document deletes its blocks (app/kv_cache_files.py).
    kv_cpu_tier_bytes: int = Field(default=1024 * MIB, ge=0)
    kv_disk_tier_enabled: bool = True
    kv_disk_tier_dir: Path = Field(default=Path(), description="Default: <data_dir>/kv_cache")
    kv_disk_tier_bytes: int = Field(default=20 * 1024 * MIB, gt=0)
    # A worker that missed a delete's broadcast drops the document's KV at its next task, or
    # within this many seconds when idle (worker/model/kv_control.py).
    kv_forget_sweep_s: float = Field(default=60.0, gt=0)
    # The model worker runs tasks in threads that share one engine: this many at once, of
    # which at most model_batch_slots are summaries (the rest stay free for questions).
    model_worker_concurrency: int = Field(default=8, ge=2)
    # Summaries (and key-facts jobs) at once, their model calls batched in the same engine
    # steps. None: concurrency - 2 on PostgreSQL, 1 on SQLite (see num_model_batch_slots).
    model_batch_slots: int | None = Field(default=None, gt=0)
    # Decoding of summaries, answers and facts (greedy): repetition control. The loop detector
    # ends a generation stuck in a loop (a span repeated 3 times over 32+ tokens, or a 5-word
    # phrase more than max_phrase_repeats times in a line) after its first copy.
    generation_repetition_penalty: float = Field(default=1.0, gt=0)
    generation_no_repeat_ngram_size: int = Field(default=0, ge=0)
    generation_stop_on_loop: bool = True
    generation_max_phrase_repeats: int = Field(default=2, ge=0)
    summary_max_new_tokens: int = Field(default=512, gt=0)
    answer_max_new_tokens: int = Field(default=256, gt=0)

    # Longest question (answer jobs, a document's or a collection's) and search query, in
    # characters after normalization; longer ones are refused with a sentence naming the limit.
    max_question_chars: int = Field(default=MAX_QUESTION_CHARS, gt=0)
    max_search_chars: int = Field(default=MAX_SEARCH_CHARS, gt=0)

    # --- Your own model server (worker/model/openai_client.py) ---
    # An OpenAI-compatible server (vLLM, SGLang, Ollama, llama.cpp, `transformers serve`) that
    # writes every summary, answer and key fact instead of our engine; "" means our engine.
    # Example: http://gpu-box:8000/v1. llm_model: the model's name on that server ("" takes the
    # first one it lists). The key is never logged nor shown; llm_api_key_file is read instead
    # when the key is not set (a mounted secret).
    llm_base_url: str = Field(default="", pattern=r"^(|https?://\S+)$")
    llm_model: str = ""
    llm_api_key: SecretStr | None = None
    llm_api_key_file: Path | None = None
    # The context length when the server's /v1/models does not give one (vLLM's max_model_len).
    llm_context_tokens: int = Field(default=8192, gt=0)
    # Requests sent at once (the server batches them), over every task of a worker process.
    llm_concurrency: int = Field(default=8, gt=0)
    # Longest one request may take; a busy server (429, 5xx) is retried this many times, with
    # exponential backoff and jitter from llm_backoff_s up to llm_backoff_max_s.
    llm_timeout_s: float = Field(default=600.0, gt=0)
    llm_max_retries: int = Field(default=4, ge=0)
    llm_backoff_s: float = Field(default=1.0, ge=0)
    llm_backoff_max_s: float = Field(default=30.0, ge=0)
    # How JSON-schema structured output (key facts, table answers) is asked for: "json_schema"
    # (OpenAI's response_format: vLLM, SGLang, Ollama 0.5+), "llamacpp" (llama.cpp's
    # response_format json_object with a schema), "off" (plain text, our own parsing); "auto"
    # tells llama.cpp by /v1/models' owned_by, else json_schema. worker/model/structured_output.py
    llm_structured_output: Literal["auto", "json_schema", "llamacpp", "off"] = "auto"

    # --- The web UI (ui/) ---
    # "" leaves the UI open (fine on one's own machine); production refuses "". Make a hash with
    # `python -m ui.auth`: "pbkdf2_sha256$<iterations>$<salt>$<hash>", never the password itself.
    ui_password_hash: str = Field(default="", pattern=UI_PASSWORD_HASH_PATTERN)
    ui_port: int = Field(default=8501, gt=0, lt=65536)
    # --- accounts (issue 25; app/services/accounts.py) ---
    # A signed-in UI session ends this long after its sign-in (also: sign-out, a disable, a
    # password reset). The audit log keeps rows this many days (`longdoc audit prune`); HIPAA
    # asks for six years of its documentation. inbox_user: the user the inbox ingests as (its
    # documents' owner); "" leaves them without owner (admins, and the collections they join).
    session_max_age_s: float = Field(default=8 * 3600, gt=0)
    audit_keep_days: float = Field(default=6 * 366, gt=0)
    inbox_user: str = ""
    # Sign-in through an identity provider (OpenID Connect, Streamlit's st.login; ui/oidc.py),
    # beside local accounts; off while oidc_issuer_url is "". The issuer (or its
    # /.well-known/openid-configuration URL), this app's client id and secret (or a file holding
    # it; never logged nor shown), and the redirect URI registered at the provider ("{port}" is
    # the UI's port). A person signed in there is the enabled LongDoc user whose name equals the
    # oidc_user_claim of their ID token (case aside); with oidc_auto_create_role "viewer", one
    # without a user becomes a new viewer with no grants (never an admin).
    oidc_issuer_url: str = Field(default="", pattern=r"^(|https?://\S+)$")
    oidc_client_id: str = ""
    oidc_client_secret: SecretStr | None = None
    oidc_client_secret_file: Path | None = None
    oidc_redirect_uri: str = Field(
        default="http://localhost:{port}/oauth2callback", pattern=r"^https?://\S+/oauth2callback$"
    )
    oidc_provider_name: str = Field(default="SSO", min_length=1, max_length=40)
    oidc_user_claim: Literal["email", "preferred_username", "sub"] = "email"
    oidc_auto_create_role: Literal["none", "viewer"] = "none"
    # --- end accounts ---

    # --- `longdoc serve`: our engine over the OpenAI-compatible API (worker/serve/) ---
    # API keys, comma-separated, and/or a file holding one per line; never logged. Without
    # any, the server listens on this machine only (127.0.0.1, localhost, ::1).
    serve_api_keys: SecretStr = SecretStr("")
    serve_api_keys_file: Path | None = None
    # Request limits: max_tokens at most this (and prompt + max_tokens within the context), a
    # request body of at most this many bytes, this many requests at once per key.
    serve_max_tokens: int = Field(default=4096, gt=0)
    serve_max_body_bytes: int = Field(default=4 * 1024 * 1024, gt=0)
    serve_max_concurrent_per_key: int = Field(default=64, gt=0)

    # --- Operations ---
    # Prometheus metrics (app/metrics.py) served on this port by each worker and the UI; None:
    # not served. One process per port: `longdoc up` gives its worker this port, its ingest
    # worker the next one and the UI the one after.
    metrics_port: int | None = Field(default=None, gt=0, lt=65536)
    # The address they listen on: this machine only, like the UI; a scraper on another host (the
    # compose stack's Prometheus) needs "0.0.0.0" or the host's own address.
    metrics_host: str = "127.0.0.1"

    @model_validator(mode="before")
    @classmethod
    def _fill_paths_from_data_dir(cls, values: Any) -> Any:
        # Before validation so that a value given as "" or not at all is derived, while one given
        # explicitly (even ".") is kept as the user wrote it.
        if not isinstance(values, dict):
            return values
        data_dir = Path(values.get("data_dir") or "./var").expanduser().absolute()
        values["data_dir"] = data_dir
        if not values.get("database_url"):
            values["database_url"] = f"sqlite:///{data_dir / 'longdoc.db'}"
        for name, default in (
            ("files_dir", "files"),
            ("model_cache_dir", "models"),
            ("inbox_dir", "inbox"),
            ("kv_disk_tier_dir", "kv_cache"),
        ):
            given = values.get(name)
            values[name] = Path(given).expanduser().absolute() if given else data_dir / default
        # Optional files given as "" (compose passes unset variables so) are not given.
        for name in ("llm_api_key_file", "serve_api_keys_file", "oidc_client_secret_file"):
            if name in values and values[name] in ("", None):
                values.pop(name)
        return values

    @model_validator(mode="after")
    def _production_needs_a_ui_password(self) -> "Settings":
        if self.is_production and not self.ui_password_hash:
            raise ValueError(
                "production needs a UI password: set LONGDOC_UI_PASSWORD_HASH to the output of "
                "`python -m ui.auth`"
            )
        return self

    @model_validator(mode="after")
    def _oidc_needs_a_client(self) -> "Settings":
        secret = self.oidc_client_secret
        has_secret = bool(secret and secret.get_secret_value()) or bool(
            self.oidc_client_secret_file
        )
        if self.oidc_issuer_url and not (self.oidc_client_id and has_secret):
            raise ValueError(
                "sign-in through an identity provider needs LONGDOC_OIDC_CLIENT_ID and "
                "LONGDOC_OIDC_CLIENT_SECRET (or LONGDOC_OIDC_CLIENT_SECRET_FILE) as well"
            )
        return self

    @property
    def is_production(self) -> bool:
        return self.environment == "production"

    @property
    def uses_model_server(self) -> bool:
        """Whether an OpenAI-compatible server writes instead of our engine."""
        return bool(self.llm_base_url)

    def llm_key(self) -> str | None:
        """The model server's API key: llm_api_key, else the first line of llm_api_key_file."""
        if self.llm_api_key is not None and self.llm_api_key.get_secret_value():
            return self.llm_api_key.get_secret_value()
        if self.llm_api_key_file is not None:
            return _secret_file_text(self.llm_api_key_file, "model server's key") or None
        return None

    @property
    def is_oidc_enabled(self) -> bool:
        return bool(self.oidc_issuer_url)

    @property
    def oidc_server_metadata_url(self) -> str:
        """The provider's discovery document: the issuer URL with its well-known path added."""
        url = self.oidc_issuer_url.rstrip("/")
        if not url or url.endswith("/.well-known/openid-configuration"):
            return url
        return url + "/.well-known/openid-configuration"

    def oidc_secret(self) -> str:
        """The client secret: oidc_client_secret, else the text of its file."""
        if self.oidc_client_secret is not None and self.oidc_client_secret.get_secret_value():
            return self.oidc_client_secret.get_secret_value()
        if self.oidc_client_secret_file is not None:
            return _secret_file_text(
                self.oidc_client_secret_file, "identity provider's client secret"
            )
        return ""

    @property
    def kv_cache_dir(self) -> Path | None:
        """The disk tier's folder, or None when the disk tier is off."""
        return self.kv_disk_tier_dir if self.kv_disk_tier_enabled else None

    @property
    def is_embedded_broker(self) -> bool:
        return not self.broker_url

    @property
    def effective_visibility_timeout_s(self) -> float:
        if self.visibility_timeout_s is not None:
            return self.visibility_timeout_s
        return max(self.model_time_limit_s, self.ingest_time_limit_s) + 600

    @property
    def num_model_batch_slots(self) -> int:
        """On SQLite a transaction that read and then writes after another connection's commit
        fails at once ("database is locked", whatever the busy timeout): summaries running
        together in one worker kept hitting that when starting and finishing their jobs, each
        time spending one of the task's database retries. So one at a time there by default."""
        slots = self.model_batch_slots
        if slots is None:
            is_sqlite = self.database_url.startswith("sqlite")
            slots = 1 if is_sqlite else self.model_worker_concurrency - 2
        return max(1, min(slots, self.model_worker_concurrency - 1))


def _secret_file_text(path: Path, what: str) -> str:
    """A secret mounted as a file: its text, stripped (the error names the file, never its text)."""
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as error:
        raise InvalidSettings(
            f"The {what} file {path} cannot be read ({error.strerror or type(error).__name__})."
        ) from None
    return text.strip()


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once. Tests call `get_settings.cache_clear()`."""
    return Settings()


def load_settings() -> Settings:
    """get_settings(), with a bad LONGDOC_* value reported as InvalidSettings."""
    try:
        return get_settings()
    except ValidationError as error:
        first = error.errors()[0]
        name = "LONGDOC_" + str(first["loc"][0]).upper() if first["loc"] else "a LONGDOC_ setting"
        # The value itself is not repeated: it may be a database URL with a password.
        raise InvalidSettings(f"Invalid setting {name}: {first['msg']}.") from None
