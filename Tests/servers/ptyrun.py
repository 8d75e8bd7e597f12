"""Runs a command in a pseudo-terminal of a given width, as a user's terminal would show it.

usage: ptyrun.py COLUMNS PAUSE_AT RESUME_AT -- COMMAND...
Sends SIGUSR1 at PAUSE_AT and RESUME_AT seconds (0: never), sends SIGWINCH after changing the
width to COLUMNS-10 half way, and writes everything the command wrote (raw bytes) to stdout,
then a last line "EXIT <status>".
"""
import fcntl, os, pty, select, signal, struct, sys, termios, time

columns, pause_at, resume_at = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
command = sys.argv[sys.argv.index("--") + 1:]

pid, fd = pty.fork()
if pid == 0:
    os.execv(command[0], command)

def set_width(width):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, width, 0, 0))

set_width(columns)
started = time.time()
output = bytearray()
paused = resumed = narrowed = False
while True:
    now = time.time() - started
    if pause_at and not paused and now >= pause_at:
        os.kill(pid, signal.SIGUSR1)
        paused = True
    if resume_at and not resumed and now >= resume_at:
        os.kill(pid, signal.SIGUSR1)
        resumed = True
    if not narrowed and now >= (resume_at or 1.0):
        set_width(columns - 10)
        os.kill(pid, signal.SIGWINCH)
        narrowed = True
    ready, _, _ = select.select([fd], [], [], 0.05)
    if ready:
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        output += data
    if now > 60:
        os.kill(pid, signal.SIGKILL)
_, status = os.waitpid(pid, 0)
sys.stdout.buffer.write(bytes(output))
sys.stdout.buffer.write(b"\nEXIT %d\n" % os.waitstatus_to_exitcode(status))
