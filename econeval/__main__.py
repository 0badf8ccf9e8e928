"""`python -m econeval` and the `econeval` command: a Ctrl-C while the CLI is still being imported
is one line too (the CLI installs its own handlers once it runs)."""

import signal
import sys


def _early(signum, _frame):
    try:
        sys.stderr.write("\neconeval: interrupted\n")
    except OSError:
        pass
    sys.exit(128 + signum)


def main() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _early)
    from .cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
