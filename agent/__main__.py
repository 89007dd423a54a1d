"""`python -m agent` and the `agent` command; Ctrl-C (or SIGTERM) while it is still starting up ends quietly,
like later."""
import sys


def run() -> int:
    from agent.cli.signals import handle_termination

    handle_termination()
    try:
        from agent.cli import main
    except KeyboardInterrupt:
        print("agent: interrupted", file=sys.stderr)
        return 130
    return main()


if __name__ == "__main__":
    sys.exit(run())
