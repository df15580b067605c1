"""``python -m liberopro_leaderboard serve|catalog``.

* ``serve --database-url URL [--host H] [--port P]``: the leaderboard alone (uvicorn).
* ``catalog [--out FILE]``: write the methodology's catalog snapshot (run it where the evaluator
  and its simulator are installed; point ``LIBEROPRO_LEADERBOARD_CATALOG`` at the file where the
  site runs without them).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m liberopro_leaderboard", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the leaderboard alone")
    serve.add_argument("--database-url", default=os.environ.get("LIBEROPRO_DATABASE_URL"),
                       help="the platform's database (default: $LIBEROPRO_DATABASE_URL)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    cat = sub.add_parser("catalog", help="write the methodology's catalog snapshot (JSON)")
    cat.add_argument("--out", type=Path, help="file to write (default: stdout)")
    args = parser.parse_args(argv)

    if args.command == "serve":
        if not args.database_url:
            parser.error("serve needs --database-url or $LIBEROPRO_DATABASE_URL")
        import uvicorn

        from liberopro_leaderboard.app import create_app

        uvicorn.run(create_app(args.database_url), host=args.host, port=args.port)
        return 0
    from liberopro_leaderboard.catalog import build_catalog

    text = build_catalog().model_dump_json(indent=2) + "\n"
    if args.out:
        args.out.write_text(text)
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
