"""The embedded broker never hands a consumer a message file before its bytes are in: messages
written while a consumer takes them as fast as it can all arrive whole. (kombu's own filesystem
transport fails this race: `_race(filesystem.Transport, ...)` lost messages to JSON errors in 3
runs of 3 here.)"""
import threading

from kombu import Connection
from kombu.transport import filesystem

import benchsite.celery  # noqa: F401  (registers the transport for filesystem://)
from benchsite import fsbroker

# Many small items: serializing one takes milliseconds, which kombu's own transport spends with
# the message file already open under its final name.
MESSAGES, ITEMS = 40, 100_000


def _race(transport_cls, tmp_path) -> tuple[int, list[str]]:
    """Put MESSAGES large messages from one thread while another takes them; (received, errors)."""
    folder = tmp_path / "in"
    folder.mkdir()
    options = {"data_folder_in": str(folder), "data_folder_out": str(folder), "store_processed": False,
               "processed_folder": str(tmp_path / "processed"), "control_folder": str(tmp_path / "control")}
    with Connection("filesystem://", transport=transport_cls, transport_options=options) as conn:
        producer, consumer = conn.channel(), Connection("filesystem://", transport=transport_cls,
                                                        transport_options=options).channel()
        received, errors, done = [], [], threading.Event()

        def take():
            while not done.is_set() or len(received) < MESSAGES:
                try:
                    received.append(len(consumer._get("q")["body"]))
                except filesystem.Empty:
                    if done.is_set() and len(received) + len(errors) >= MESSAGES:
                        return
                except Exception as exc:  # the half-written message
                    errors.append(f"{type(exc).__name__}: {exc}")
                if len(received) + len(errors) >= MESSAGES:
                    return

        thread = threading.Thread(target=take, daemon=True)
        thread.start()
        for i in range(MESSAGES):
            producer._put("q", {"body": list(range(ITEMS))})
        done.set()
        thread.join(timeout=120)
    return len(received), errors


def test_messages_written_while_a_consumer_takes_them_arrive_whole(tmp_path):
    received, errors = _race(fsbroker.Transport, tmp_path)
    assert errors == [] and received == MESSAGES


def test_the_celery_app_uses_it_for_the_embedded_broker():
    from kombu.transport import resolve_transport

    assert resolve_transport("filesystem") is fsbroker.Transport
