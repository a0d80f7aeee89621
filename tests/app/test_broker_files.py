"""The embedded broker's transport writes whole messages only (app/broker_files.py)."""

from __future__ import annotations

import threading

from kombu import Connection

from app import broker_files
from app.services import dispatch  # noqa: F401  (registers the transport, as every client does)

NUM_MESSAGES = 400


def _connection(folder) -> Connection:
    folder.mkdir(exist_ok=True)
    options = {
        "data_folder_in": str(folder),
        "data_folder_out": str(folder),
        "control_folder": str(folder.parent / "control"),
        "store_processed": False,
        "polling_interval": 0.001,
    }
    return Connection("filesystem://", transport_options=options)


def test_filesystem_urls_use_the_whole_message_transport(tmp_path) -> None:
    with _connection(tmp_path / "queue") as connection:
        assert connection.transport_cls is broker_files.Transport or isinstance(
            connection.transport, broker_files.Transport
        )


def test_a_consumer_reading_while_a_producer_writes_gets_every_message_whole(tmp_path) -> None:
    # kombu's own transport creates the file before writing it: a consumer polling at the same
    # time reads an empty file now and then, and the worker dies on the JSON error.
    folder = tmp_path / "queue"
    received: list[dict] = []
    errors: list[BaseException] = []

    def consume() -> None:
        try:
            with _connection(folder) as connection:
                queue = connection.SimpleQueue("q")
                while len(received) < NUM_MESSAGES:
                    message = queue.get(timeout=30)
                    received.append(message.payload)
                    message.ack()
        except BaseException as error:
            errors.append(error)

    consumer = threading.Thread(target=consume)
    consumer.start()
    with _connection(folder) as connection:
        queue = connection.SimpleQueue("q")
        for number in range(NUM_MESSAGES):
            queue.put({"n": number, "padding": "x" * 2000})
    consumer.join(timeout=120)

    assert not errors, errors
    assert sorted(payload["n"] for payload in received) == list(range(NUM_MESSAGES))
    assert not list(folder.glob("*.partial"))


def test_queues_bound_while_others_publish_are_all_kept_and_the_table_never_reads_empty(
    tmp_path,
) -> None:
    # kombu's own transport empties the exchange table before locking it: a publisher reading it
    # then fails on an empty file, and two processes binding at once can drop each other's queue.
    folder = tmp_path / "queue"
    names = [f"q{number}" for number in range(12)]
    errors: list[BaseException] = []
    stop = threading.Event()

    def bind(name: str) -> None:
        try:
            with _connection(folder) as connection:
                connection.SimpleQueue(name).put({"queue": name})
        except BaseException as error:
            errors.append(error)

    def read_tables() -> None:
        try:
            with _connection(folder) as connection:
                channel = connection.default_channel
                while not stop.is_set():
                    channel.get_table("")
                    channel.get_table(names[0])
        except BaseException as error:
            errors.append(error)

    reader = threading.Thread(target=read_tables)
    reader.start()
    binders = [threading.Thread(target=bind, args=(name,)) for name in names]
    for thread in binders:
        thread.start()
    for thread in binders:
        thread.join(timeout=60)
    stop.set()
    reader.join(timeout=60)

    assert not errors, errors
    with _connection(folder) as connection:
        for name in names:
            message = connection.SimpleQueue(name).get(timeout=5)
            assert message.payload == {"queue": name}
            message.ack()
    assert not list((tmp_path / "control").glob("*.partial"))
