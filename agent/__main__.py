"""`python -m agent` and the `agent` command; Ctrl-C while it is still starting up ends quietly, like later.
A termination request (SIGTERM: `kill`, a stopped service or container) ends a run as Ctrl-C does: the
trace and the run log are completed, and the exit code is 130."""
import signal
import sys


def _terminated(signum, frame):
    raise KeyboardInterrupt


def run() -> int:
    signal.signal(signal.SIGTERM, _terminated)
    try:
        from agent.cli import main
    except KeyboardInterrupt:
        print("agent: interrupted", file=sys.stderr)
        return 130
    return main()


if __name__ == "__main__":
    sys.exit(run())
