"""Write a report document (:mod:`liberopro.report.build`) as Markdown and as one self-contained
HTML page.

``report.md``: GitHub-flavoured Markdown tables; each chart is written to ``figures/<id>.svg``
and linked. ``report.html``: inline CSS (the leaderboard's palette) and inline SVG charts, no
script, no external resource (nothing is fetched when the page is opened). The charts' SVG ids
are prefixed per chart, so several charts on one page never share an id.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from liberopro.report.build import Document, Figure, Heading, Table, Text
from liberopro.report.palette import css_variables


# ------------------------------------------------------------------------------- Markdown
def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(doc: Document, figures: dict[str, str]) -> str:
    """The document as Markdown; ``figures`` maps a figure id to its relative SVG path."""
    out = [f"# {doc.title}", "", *(p for para in doc.intro for p in (para, ""))]
    out += ["Contents: " + " · ".join(f"[{s.title}](#{s.id})" for s in doc.sections), ""]
    for sec in doc.sections:
        out += [f'<a id="{sec.id}"></a>', "", f"## {sec.title}", ""]
        for b in sec.blocks:
            if isinstance(b, Text):
                out += [b.text, ""]
            elif isinstance(b, Heading):
                out += [f"### {b.text}", ""]
            elif isinstance(b, Table):
                out += [
                    f"*{b.caption}*",
                    "",
                    "| " + " | ".join(_md_cell(h) for h in b.headers) + " |",
                    "|" + "|".join("---" for _ in b.headers) + "|",
                ]
                out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in b.rows]
                out.append("")
            elif isinstance(b, Figure):
                out += [f"![{_md_cell(b.chart.title)}]({figures[b.id]})", ""]
    return "\n".join(out).rstrip() + "\n"


# ------------------------------------------------------------------------------- HTML
_XML_HEAD = re.compile(r"<\?xml[^>]*\?>\s*|<!DOCTYPE[^>]*>\s*", re.S)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)
_IDS = re.compile(r'\bid="([^"]+)"')


def inline_svg(svg: bytes | str, prefix: str, label: str) -> str:
    """An SVG document made fit to sit inside an HTML page: no XML declaration, DOCTYPE or
    metadata block; every id (and each ``#id`` / ``url(#id)`` reference to it) prefixed with
    ``prefix``; ``role="img"`` and ``aria-label`` on the root."""
    text = svg.decode() if isinstance(svg, bytes) else svg
    text = _METADATA.sub("", _XML_HEAD.sub("", text))
    ids = set(_IDS.findall(text))
    if ids:
        names = "|".join(re.escape(i) for i in sorted(ids, key=len, reverse=True))
        text = re.sub(
            rf'(\bid="|href="#|url\(#)({names})(?=["\)])', lambda m: f"{m.group(1)}{prefix}-{m.group(2)}", text
        )
    start = text.index("<svg")
    return text[:start] + f'<svg role="img" aria-label="{html.escape(label)}"' + text[start + 4 :]


_CSS = """
:root { %(vars)s }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg); font: 15px/1.5 "DejaVu Sans", system-ui, sans-serif; }
main { max-width: 1200px; margin: 0 auto; padding: 1.5rem 1rem 4rem; }
h1 { font-size: 1.6rem; margin: 0 0 .5rem; }
h2 { font-size: 1.3rem; margin: 2.2rem 0 .6rem; padding-top: .6rem; border-top: 1px solid var(--border); }
h3 { font-size: 1.05rem; margin: 1.4rem 0 .4rem; }
p { margin: .4rem 0 .8rem; max-width: 75ch; }
p.note { color: var(--muted); }
code { background: var(--surface); padding: 0 .25em; border-radius: 3px; }
nav ol { columns: 2; margin: .5rem 0 1rem; padding-left: 1.4rem; }
a { color: var(--link); }
.table-wrap { overflow-x: auto; width: fit-content; max-width: 100%%; margin: .4rem 0 1.2rem;
              border: 1px solid var(--border); border-radius: 4px; }
table { border-collapse: collapse; font-size: .82rem; font-variant-numeric: tabular-nums; }
caption { caption-side: top; text-align: left; font-weight: 600; padding: .45rem .6rem; background: var(--surface); }
th, td { padding: .3rem .6rem; border-top: 1px solid var(--border); text-align: left; vertical-align: top; }
thead th { background: var(--surface); white-space: nowrap; }
tbody th { font-weight: 600; white-space: nowrap; }
tbody tr:nth-child(even) td, tbody tr:nth-child(even) th { background: #fbfcfd; }
figure { margin: .6rem 0 1.6rem; }
figure svg { max-width: 100%%; height: auto; display: block; }
figcaption { color: var(--muted); font-size: .85rem; margin-top: .3rem; max-width: 90ch; }
"""


def _inline(text: str) -> str:
    """Escape, then `code` spans."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def render_html(doc: Document, svgs: dict[str, bytes]) -> str:
    """The document as one HTML page; ``svgs`` maps a figure id to its rendered SVG."""
    e = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{e(doc.title)}</title>",
        f"<style>{_CSS % {'vars': css_variables()}}</style>",
        "</head>",
        "<body>",
        "<main>",
        f"<h1>{e(doc.title)}</h1>",
    ]
    parts += [f"<p>{_inline(p)}</p>" for p in doc.intro]
    parts += ['<nav aria-label="Contents"><ol>'] + [
        f'<li><a href="#{s.id}">{e(s.title)}</a></li>' for s in doc.sections
    ]
    parts.append("</ol></nav>")
    for sec in doc.sections:
        parts.append(f'<section aria-labelledby="{sec.id}"><h2 id="{sec.id}">{e(sec.title)}</h2>')
        for b in sec.blocks:
            if isinstance(b, Text):
                cls = ' class="note"' if b.text.startswith(("Note:", "Not paired:")) else ""
                parts.append(f"<p{cls}>{_inline(b.text)}</p>")
            elif isinstance(b, Heading):
                parts.append(f'<h3 id="{b.id}">{e(b.text)}</h3>')
            elif isinstance(b, Table):
                head = "".join(f'<th scope="col">{e(h)}</th>' for h in b.headers)
                body = "".join(
                    "<tr>"
                    + f'<th scope="row">{e(row[0])}</th>'
                    + "".join(f"<td>{e(c)}</td>" for c in row[1:])
                    + "</tr>"
                    for row in b.rows
                )
                parts.append(
                    f'<div class="table-wrap" role="region" aria-label="{e(b.caption)}" tabindex="0">'
                    f'<table id="{b.id}"><caption>{e(b.caption)}</caption><thead><tr>{head}</tr></thead>'
                    f"<tbody>{body}</tbody></table></div>"
                )
            elif isinstance(b, Figure):
                parts.append(
                    f'<figure id="{b.id}">{inline_svg(svgs[b.id], b.id, b.chart.alt)}'
                    f"<figcaption>{e(b.chart.title)}</figcaption></figure>"
                )
        parts.append("</section>")
    parts += ["</main>", "</body>", "</html>"]
    return "\n".join(parts) + "\n"


def write(doc: Document, out_dir: Path) -> dict[str, Path | None]:
    """Render every chart once, then write ``report.md``, ``figures/*.svg`` and ``report.html``
    into ``out_dir`` (created). Returns the paths by kind (``markdown``, ``html``, ``figures``:
    None when the document has no chart, and then no ``figures/`` is made)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    fig_dir = out_dir / "figures"
    svgs: dict[str, bytes] = {}
    rel: dict[str, str] = {}
    for sec in doc.sections:
        for b in sec.blocks:
            if isinstance(b, Figure):
                fig_dir.mkdir(exist_ok=True)
                svgs[b.id] = b.chart.render()
                (fig_dir / f"{b.id}.svg").write_bytes(svgs[b.id])
                rel[b.id] = f"figures/{b.id}.svg"
    md, page = out_dir / "report.md", out_dir / "report.html"
    md.write_text(render_markdown(doc, rel))
    page.write_text(render_html(doc, svgs))
    return {"markdown": md, "html": page, "figures": fig_dir if svgs else None}
