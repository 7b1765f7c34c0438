"""A TCP proxy that can be cut and restored: the web worker reaches PostgreSQL through it, so a
database outage is injected for that worker alone while the shared server stays up.

cut(): every open connection is closed and the port refuses new ones (ECONNREFUSED), as when
the database host goes away. restore(): the same port accepts again.
"""
import socket
import threading

from .harness import free_port


class TcpProxy:
    def __init__(self, target_host: str, target_port: int):
        self.target = (target_host, target_port)
        self.port = free_port()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._stop = threading.Event()
        self.accepted = 0  # connections accepted (for the report)

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.2)  # the accept loop checks for a cut this often
        self._stop = threading.Event()
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener, self._stop), daemon=True).start()

    restore = start

    def cut(self) -> None:
        self._stop.set()
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._sockets = self._sockets, set()
        if listener is not None:
            listener.close()
        for sock in sockets:
            _close(sock)

    stop = cut

    def _accept(self, listener: socket.socket, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                _close(client)
                continue
            client.settimeout(None)
            upstream.settimeout(None)
            with self._lock:
                if stop.is_set():  # cut while this one was being set up
                    _close(client), _close(upstream)
                    return
                self._sockets |= {client, upstream}
                self.accepted += 1
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._sockets -= {src, dst}
            _close(src), _close(dst)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
