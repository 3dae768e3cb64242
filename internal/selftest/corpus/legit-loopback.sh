# class: legitimate
# expect: allowed
# control: sandbox
# reason: a test that starts a server on the sandbox's own loopback and talks to it works with no network grant
command -v python3 >/dev/null || { missing python3; exit 0; }
attempt python3 -c '
import socket, threading
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(1)
def serve():
    c, _ = s.accept()
    c.sendall(c.recv(64).upper())
    c.close()
threading.Thread(target=serve).start()
c = socket.create_connection(s.getsockname(), timeout=5)
c.sendall(b"ping")
print(c.recv(64).decode(), "from", s.getsockname())
'
