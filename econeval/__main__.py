"""`python -m econeval` and the `econeval` command: a Ctrl-C while the CLI is still being imported
is one line too (the CLI installs its own handlers once it runs; signals.py owns them all)."""


def main() -> None:
    from . import signals

    signals.install(signals.early)
    from .cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
