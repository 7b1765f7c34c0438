"""The embedded broker: kombu's filesystem transport, each message written whole before it can be
taken. kombu writes a message file in place, under its final name; a consumer listing the folder
meanwhile can move it away and read it empty (a web worker died on the empty JSON and the message
was lost). Here the bytes go to a hidden temporary name first (one no queue matches), then
os.replace gives the file its name at once. Registered for `filesystem://` in benchsite/celery.py."""
import os
import uuid
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = os.path.join(self.data_folder_out, f".partial-{uuid.uuid4()}")  # matches no queue
        try:
            with open(partial, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory: {exc}") from exc


class Transport(filesystem.Transport):
    Channel = Channel
