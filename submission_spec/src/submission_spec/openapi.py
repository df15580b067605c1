"""The committed OpenAPI document of spec v1, generated from the models.

``python -m submission_spec.openapi`` rewrites ``submission_spec/openapi.json``; a test fails
when the committed file differs from what the models generate.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from pydantic.json_schema import models_json_schema

from submission_spec.models import ObservationMessage, PolicyMetadata, ResetRequest

#: Where the committed document lives (next to the package's pyproject.toml).
OPENAPI_PATH = Path(__file__).resolve().parents[2] / "openapi.json"


def build_openapi() -> dict:
    """The OpenAPI 3.1 document of the policy server, as a dict (deterministic)."""
    from submission_spec.server import create_app

    app = create_app(lambda obs: np.zeros((1, 7)), PolicyMetadata(policy_name="spec"))
    doc = app.openapi()
    _, defs = models_json_schema(
        [(ResetRequest, "validation"), (ObservationMessage, "validation")],
        ref_template="#/components/schemas/{model}",
    )
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in defs.get("$defs", {}).items():
        schemas.setdefault(name, schema)
    doc["components"]["schemas"] = dict(sorted(schemas.items()))
    return doc


def render() -> str:
    return json.dumps(build_openapi(), indent=2, sort_keys=False) + "\n"


def main(argv: list[str] | None = None) -> None:
    """``python -m submission_spec.openapi [OUT]``: write :func:`render` to ``OUT`` (default: the
    committed ``submission_spec/openapi.json``)."""
    import typer

    def write(out: Path = typer.Argument(OPENAPI_PATH, help="Where to write the document.")) -> None:
        out.write_text(render())
        print(f"wrote {out}")

    app = typer.Typer(add_completion=False, context_settings={"help_option_names": ["-h", "--help"]})
    app.command(help="Write the OpenAPI document of spec v1.")(write)
    app(args=argv, prog_name="python -m submission_spec.openapi")


if __name__ == "__main__":
    main()
