"""`python -m store.migrations revision -m "what changed"`: write the next revision from the changes in
store/models.py; `python -m store.migrations head`: print this release's head revision."""

from __future__ import annotations

import argparse

from store.migrate import head_revision, new_revision


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m store.migrations",
                                     description="Schema revisions of the results store.")
    commands = parser.add_subparsers(dest="command", required=True)
    revision = commands.add_parser("revision", help="write the next revision from the changes in store/models.py")
    revision.add_argument("-m", "--message", required=True, help="what changed, in a few words")
    commands.add_parser("head", help="print this release's head revision")
    args = parser.parse_args()
    if args.command == "revision":
        new_revision(args.message)
    else:
        print(head_revision())


if __name__ == "__main__":
    main()
