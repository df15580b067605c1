"""``python -m liberopro_leaderboard serve``: the leaderboard alone (uvicorn), on
``--database-url URL [--host H] [--port P]``."""

from __future__ import annotations

import argparse
import os


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m liberopro_leaderboard",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the leaderboard alone")
    serve.add_argument(
        "--database-url",
        default=os.environ.get("LIBEROPRO_DATABASE_URL"),
        help="the platform's database (default: $LIBEROPRO_DATABASE_URL)",
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)

    if not args.database_url:
        parser.error("serve needs --database-url or $LIBEROPRO_DATABASE_URL")
    import uvicorn

    from liberopro_leaderboard.app import create_app

    uvicorn.run(create_app(args.database_url), host=args.host, port=args.port)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
