"""What the broker still holds: the task ids of messages waiting in a queue or delivered and not
yet acknowledged. The database is the source of truth for runs; this tells which QUEUED runs
lost their message (a Redis restarted without its data) and must be sent again.

Redis only (kombu's layout: a list per queue, one per priority step, and the `unacked` hash of
delivered messages); another broker answers None and nothing is re-sent.
"""
import json
import logging

import redis

log = logging.getLogger(__name__)

# kombu's redis transport: queue `q` at priority p > 0 lives in the list `q\x06\x16p`
PRIORITY_SEPARATOR = "\x06\x16"
PRIORITY_STEPS = (0, 3, 6, 9)
UNACKED_KEY = "unacked"


def _task_id(raw: bytes | str) -> str | None:
    try:
        message = json.loads(raw)
    except ValueError:
        return None
    if isinstance(message, list):  # unacked entries: [message, exchange, routing_key]
        message = message[0] if message else {}
    headers = message.get("headers") if isinstance(message, dict) else None
    return headers.get("id") if isinstance(headers, dict) else None


def live_task_ids(broker_url: str, queues: set[str]) -> set[str] | None:
    """Ids of the tasks waiting in QUEUES or unacknowledged; None when it cannot be known."""
    if not broker_url.startswith(("redis://", "rediss://")):
        return None
    client = redis.Redis.from_url(broker_url, socket_timeout=10, socket_connect_timeout=5)
    try:
        raws = []
        for queue in queues:
            for step in PRIORITY_STEPS:
                key = queue if step == 0 else f"{queue}{PRIORITY_SEPARATOR}{step}"
                raws.extend(client.lrange(key, 0, -1))
        raws.extend(client.hvals(UNACKED_KEY))
    except redis.RedisError as exc:
        log.warning("cannot read the broker's queues (%s): no lost run re-sent this time", exc)
        return None
    finally:
        client.close()
    return {tid for tid in map(_task_id, raws) if tid}
