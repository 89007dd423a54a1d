"""A termination request (SIGTERM: `kill`, a stopped service or container) handled as Ctrl-C is, so that a run
ends with its trace and run log complete; and remembered, so that `agent chat`, which survives Ctrl-C, ends."""
import signal

terminated = False


def handle_termination() -> None:
    signal.signal(signal.SIGTERM, _terminate)


def _terminate(signum, frame):
    global terminated
    terminated = True
    raise KeyboardInterrupt


def raise_if_terminated() -> None:
    """Raise KeyboardInterrupt once a termination request came: for `agent chat`, where Ctrl-C alone only stops
    a turn, so that SIGTERM ends it as it ends a run."""
    if terminated:
        raise KeyboardInterrupt
