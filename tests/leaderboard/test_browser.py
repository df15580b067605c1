"""The leaderboard in a real headless Chromium (Playwright driving the system browser), served by
the platform app over the seeded PostgreSQL database: the pages render the API's numbers,
sorting and links work, charts load, the console stays clean, and basic accessibility holds
(table headers with scope, captions, labels, alt text, headings, computed colour contrast).

Screenshots of every page are written to ``build/screenshots/leaderboard/``."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.leaderboard.seed import HIDDEN_POLICY, TRIAL_POLICY, TRIAL_REASONS

VISIBLE = {"OpenVLA-OFT", "pi0-FAST", "Diffusion Policy", "BC-RNN baseline", TRIAL_POLICY}

# Per element with text: its computed colour against the first opaque background up the tree.
CONTRAST_JS = """() => {
  const parse = c => { const m = c.match(/rgba?\\(([^)]+)\\)/); if (!m) return null;
    const p = m[1].split(',').map(parseFloat); return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1}; };
  const lum = c => { const f = v => { v /= 255; return v <= 0.04045 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b); };
  const background = el => { for (; el; el = el.parentElement) { const c = parse(getComputedStyle(el).backgroundColor);
    if (c && c.a > 0) return c; } return {r: 255, g: 255, b: 255, a: 1}; };
  const out = []; const seen = new Set();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode; const el = node.parentElement;
    if (!node.textContent.trim() || seen.has(el)) continue; seen.add(el);
    const st = getComputedStyle(el); const rect = el.getBoundingClientRect();
    if (st.visibility === 'hidden' || rect.width === 0 || rect.height === 0) continue;
    const fg = parse(st.color), bg = background(el);
    const l1 = lum(fg), l2 = lum(bg);
    const ratio = (Math.max(l1, l2) + 0.05) / (Math.min(l1, l2) + 0.05);
    const size = parseFloat(st.fontSize), bold = parseInt(st.fontWeight) >= 700;
    out.push({text: node.textContent.trim().slice(0, 50), ratio: ratio, need: (size >= 24 || (bold && size >= 18.66)) ? 3 : 4.5,
              alpha: fg.a});
  }
  return out;
}"""

A11Y_JS = """() => {
  const problems = [];
  if (!document.documentElement.lang) problems.push('html without lang');
  if (document.querySelectorAll('h1').length !== 1) problems.push('not exactly one h1');
  if (!document.querySelector('main')) problems.push('no main landmark');
  for (const th of document.querySelectorAll('th')) if (!th.hasAttribute('scope')) problems.push('th without scope: ' + th.textContent.trim());
  for (const t of document.querySelectorAll('table')) if (!t.querySelector('caption')) problems.push('table without caption');
  for (const img of document.querySelectorAll('img')) if (!(img.getAttribute('alt') || '').trim()) problems.push('img without alt: ' + img.src);
  for (const el of document.querySelectorAll('select, input:not([type=hidden]), textarea'))
    if (!(el.labels && el.labels.length) && !el.getAttribute('aria-label')) problems.push('unlabelled control: ' + (el.id || el.name));
  for (const el of document.querySelectorAll('[role=region]'))
    if (!el.getAttribute('aria-label') && !el.getAttribute('aria-labelledby')) problems.push('region without a name');
  for (const el of document.querySelectorAll('[aria-labelledby]'))
    for (const id of el.getAttribute('aria-labelledby').split(' ')) if (!document.getElementById(id)) problems.push('dangling aria-labelledby ' + id);
  const ids = [...document.querySelectorAll('[id]')].map(e => e.id);
  for (const id of ids) if (ids.indexOf(id) !== ids.lastIndexOf(id)) problems.push('duplicate id ' + id);
  let level = 1;
  for (const h of document.querySelectorAll('h1, h2, h3, h4, h5, h6')) {
    const l = parseInt(h.tagName[1]); if (l > level + 1) problems.push('heading level skipped at ' + h.textContent.trim()); level = l; }
  for (const a of document.querySelectorAll('a')) if (!a.textContent.trim() && !a.getAttribute('aria-label')) problems.push('link without text');
  return [...new Set(problems)];
}"""


@pytest.fixture(scope="module")
def api(server):
    with httpx.Client(base_url=server, timeout=120) as c:
        yield c


def check_accessibility(page) -> None:
    problems = page.evaluate(A11Y_JS)
    assert not problems, problems
    low = [c for c in page.evaluate(CONTRAST_JS) if c["ratio"] < c["need"]]
    assert not low, f"text below the WCAG contrast minimum: {low[:10]}"
    assert all(c["alpha"] == 1 for c in page.evaluate(CONTRAST_JS)), (
        "text colours are opaque (no alpha blending to judge)"
    )


def images_loaded(page) -> None:
    """Every image finished loading (charts are drawn on first request: seconds) and decoded."""
    page.wait_for_function("() => [...document.images].every(i => i.complete)", timeout=60_000)
    broken = page.evaluate(
        "() => [...document.images].filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src)"
    )
    assert not broken, f"images that did not load: {broken}"


def table_rows(page) -> list[dict]:
    """The ranking as the page shows it: per row the id, rank text and every rate cell."""
    return page.evaluate("""() => [...document.querySelectorAll('#ranking tbody tr[data-submission]')].map(tr => ({
        id: tr.dataset.submission, rank: tr.querySelector('td.rank').textContent.trim(),
        trial: tr.classList.contains('trial'),
        name: tr.querySelector('th.name a').textContent.trim(),
        cells: Object.fromEntries([...tr.querySelectorAll('td.rate')].map(td => [td.dataset.key, {
            value: td.dataset.value === undefined ? null : parseFloat(td.dataset.value),
            low: td.dataset.low === undefined ? null : parseFloat(td.dataset.low),
            high: td.dataset.high === undefined ? null : parseFloat(td.dataset.high),
            episodes: parseInt(td.dataset.episodes),
            shown: td.querySelector('.v').textContent.trim(),
            ci: td.querySelector('.ci') ? td.querySelector('.ci').textContent.replace('95% interval', '').trim() : null,
            n: td.querySelector('.n') ? td.querySelector('.n').textContent.trim() : null}]))}))""")


def assert_page_equals_api(page, data: dict) -> None:
    rows = table_rows(page)
    assert [r["id"] for r in rows] == [r["submission_id"] for r in data["rows"]], "same rows in the same order"
    for shown, row in zip(rows, data["rows"], strict=True):
        assert shown["trial"] == row["trial"]
        assert shown["rank"] == ("trial" if row["trial"] else f"{row['rank']}{'=' if row['tied'] else ''}")
        assert shown["name"] == row["policy_name"]
        assert set(shown["cells"]) == set(row["metrics"])
        for key, m in row["metrics"].items():
            cell = shown["cells"][key]
            assert cell["episodes"] == m["episodes"], key
            if m["value"] is None:
                assert cell["value"] is None and cell["shown"] == "–"
                continue
            assert cell["value"] == m["value"] and [cell["low"], cell["high"]] == m["ci95"], key
            assert cell["shown"] == f"{100 * m['value']:.1f}%"
            assert cell["ci"] == f"{100 * m['ci95'][0]:.1f}–{100 * m['ci95'][1]:.1f}"
            assert cell["n"] == f"n={m['episodes']}"


def test_leaderboard_renders_the_api_ranking(probe, server, api, ids):
    probe.goto(f"{server}/leaderboard")
    page = probe.page
    assert page.title().startswith("Leaderboard")
    assert_page_equals_api(page, api.get("/api/leaderboard").json())
    assert {r["name"] for r in table_rows(page)} == VISIBLE
    assert HIDDEN_POLICY not in page.content()
    assert "entire 95% interval lies above" in page.inner_text(".tie-rule")
    assert page.locator("td.rank abbr[title^='tied']").count() == 2  # the two leaders share rank 1
    # the trial run: last, in its own section, a visible badge in place of a rank, its reasons as text
    assert [r["trial"] for r in table_rows(page)] == [False] * 4 + [True]
    trial = page.locator(f"#ranking tbody.trials tr[data-submission='{ids[TRIAL_POLICY]}']")
    assert page.locator("#ranking tbody.trials th#trial-runs").inner_text().startswith("Trial runs (not comparable)")
    badge = trial.locator("td.rank .badge-trial")
    assert badge.is_visible() and badge.inner_text().strip().lower() == "trial"
    assert badge.get_attribute("title") == "Trial run, not ranked: " + "; ".join(TRIAL_REASONS)
    reasons = trial.locator("th.name .trial-reasons")
    assert reasons.is_visible() and reasons.inner_text() == "Trial run: " + "; ".join(TRIAL_REASONS)
    assert page.locator("#ranking tbody:not(.trials) .badge-trial").count() == 0
    images_loaded(page)
    check_accessibility(page)
    probe.screenshot("leaderboard")
    probe.page.set_viewport_size({"width": 1440, "height": 900})
    probe.screenshot("leaderboard-viewport", full_page=False)
    # its page says at the top that it is a trial run, and why
    trial.locator("th.name a").click()
    page.wait_for_load_state("networkidle")
    notice = page.locator("#trial-notice")
    assert notice.is_visible() and "This is a trial run, not a full result." in notice.inner_text()
    assert notice.locator("ul.trial-reasons li").all_inner_texts() == TRIAL_REASONS
    assert page.evaluate("() => document.querySelector('#trial-notice').previousElementSibling.tagName") == "H1"
    assert "Not ranked" in page.inner_text("p.lead")
    check_accessibility(page)
    probe.screenshot("submission-trial")
    probe.assert_clean()


def test_clicking_headers_sorts_and_toggles(probe, server, api):
    probe.goto(f"{server}/leaderboard")
    page = probe.page
    page.click("th[data-sort-key='nominal'] a")
    page.wait_for_load_state("networkidle")
    assert "sort=nominal" in page.url and "order=desc" in page.url
    assert page.get_attribute("th[data-sort-key='nominal']", "aria-sort") == "descending"
    assert page.get_attribute("th[data-sort-key='overall']", "aria-sort") == "none"
    assert_page_equals_api(page, api.get("/api/leaderboard", params={"sort": "nominal", "order": "desc"}).json())
    values = [r["cells"]["nominal"]["value"] for r in table_rows(page) if not r["trial"]]  # the trial run: last
    assert values == sorted(values, reverse=True)

    page.click("th[data-sort-key='nominal'] a")  # again: ascending
    page.wait_for_load_state("networkidle")
    assert page.get_attribute("th[data-sort-key='nominal']", "aria-sort") == "ascending"
    values = [r["cells"]["nominal"]["value"] for r in table_rows(page) if not r["trial"]]
    assert values == sorted(values)

    page.click("a[data-sort-key='team']")
    page.wait_for_load_state("networkidle")
    assert_page_equals_api(page, api.get("/api/leaderboard", params={"sort": "team", "order": "asc"}).json())
    assert page.inner_text("caption#ranking-caption").startswith("Ranking of 4 submissions, sorted by Team")
    probe.screenshot("leaderboard-sorted-by-team")

    # the form (no script needed either): runtime Robot, ascending
    page.select_option("#sort", "runtime.Robot")
    page.select_option("#order", "asc")
    page.click("form.sort button[type=submit]")
    page.wait_for_load_state("networkidle")
    assert "sort=runtime.Robot" in page.url
    data = api.get("/api/leaderboard", params={"sort": "runtime.Robot", "order": "asc"}).json()
    assert data["rank_by"] == "runtime.Robot"
    assert_page_equals_api(page, data)
    assert "by runtime Robot" in page.inner_text("th.rank-col")
    probe.screenshot("leaderboard-sorted-by-runtime-robot")
    probe.assert_clean()


def test_every_link_on_every_page_works(probe, server, ids):
    pages = [
        "/leaderboard",
        f"/leaderboard/submissions/{ids['OpenVLA-OFT']}",
        f"/leaderboard/compare?a={ids['pi0-FAST']}&b={ids['BC-RNN baseline']}",
        "/leaderboard/methodology",
    ]
    checked: set[str] = set()
    for path in pages:
        probe.goto(server + path)
        hrefs = probe.page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
        for href in hrefs:
            if not href.startswith(server) or href in checked:
                continue
            checked.add(href.split("#")[0])
            r = probe.page.request.get(href)
            assert r.status == 200, (path, href, r.status)
            if "#" in href:  # in-page anchors point at an element that exists
                anchor = href.split("#", 1)[1]
                if href.split("#")[0] == probe.page.url.split("#")[0]:
                    assert probe.page.locator(f"[id='{anchor}']").count() == 1, href
    assert any("/api/leaderboard.csv" in h for h in checked) and any("/leaderboard/submissions/" in h for h in checked)
    probe.assert_clean()


def test_submission_page(probe, server, api, ids):
    sid = ids["OpenVLA-OFT"]
    probe.goto(f"{server}/leaderboard")
    probe.page.click(f"tr[data-submission='{sid}'] th.name a")
    probe.page.wait_for_load_state("networkidle")
    page = probe.page
    assert page.url.endswith(f"/leaderboard/submissions/{sid}")
    assert page.inner_text("h1").startswith("OpenVLA-OFT")
    data = api.get(f"/api/leaderboard/submissions/{sid}").json()
    for key in ("overall", "nominal", "static_mean", "runtime_mean"):
        card = page.locator(f".card[data-key='{key}']")
        assert float(card.get_attribute("data-value")) == data["metrics"][key]["value"]
        assert card.locator(".big").inner_text() == f"{100 * data['metrics'][key]['value']:.1f}%"
    shown = page.eval_on_selector_all(
        "#shift-table td.rate", "tds => tds.map(td => [td.dataset.key, parseFloat(td.dataset.value)])"
    )
    singles = {
        c["case"]: c["rate"]["value"]
        for c in data["cases"]
        if c["observations"] == "live" and c["recovery"] == "none" and len(c["shift_ids"]) <= 1
    }
    assert dict(shown) == singles
    text = page.inner_text("main")
    for needle in (
        data["meta"]["image_digest"],
        "Submission spec version",
        data["meta"]["evaluator_version"],
        "mujoco",
        "2.3.7",
        "robosuite",
        "1.4.0",
        "Published",
        "Compositions",
        "D10+S01",
        "1 unproved",  # the seeded unproved S20 instance, shown apart
    ):
        assert needle in text, needle
    s20 = page.locator("#shift-table tr[data-case='S20'] td").last.inner_text()
    assert s20.startswith("1 (10 ep., ") and s20.endswith("%)"), s20
    assert page.locator("#trial-notice").count() == 0  # a full result
    alts = page.eval_on_selector_all("figure.chart img", "imgs => imgs.map(i => i.alt)")
    assert len(alts) == 2 and all("95%" in a for a in alts)
    assert "Condition: static" in alts[0]  # the text alternative carries the numbers
    images_loaded(page)
    check_accessibility(page)
    probe.screenshot("submission")
    # compare from here
    page.select_option("#compare-b", ids["Diffusion Policy"])
    page.click("form.inline button[type=submit]")
    page.wait_for_load_state("networkidle")
    assert f"a={sid}" in page.url and f"b={ids['Diffusion Policy']}" in page.url
    probe.assert_clean()


def test_compare_page(probe, server, api, ids):
    a, b = ids["OpenVLA-OFT"], ids["pi0-FAST"]
    probe.goto(f"{server}/leaderboard/compare")
    page = probe.page
    page.select_option("#cmp-a", a)
    page.select_option("#cmp-b", b)
    page.click(".compare-form button[type=submit]")
    page.wait_for_load_state("networkidle")
    data = api.get("/api/leaderboard/compare", params={"a": a, "b": b}).json()
    rows = page.eval_on_selector_all(
        "#cmp-metrics tbody tr",
        """trs => trs.map(tr => ({key: tr.dataset.key,
        a: parseFloat(tr.querySelectorAll('td.rate')[0].dataset.value), b: parseFloat(tr.querySelectorAll('td.rate')[1].dataset.value),
        verdict: tr.lastElementChild.textContent.trim()}))""",
    )
    assert [r["key"] for r in rows] == [m["key"] for m in data["metrics"]]
    for r, m in zip(rows, data["metrics"], strict=True):
        assert (r["a"], r["b"]) == (m["a"]["value"], m["b"]["value"])
        assert r["verdict"].startswith("separated") == m["separated"]
    assert page.locator("#cmp-cases tbody tr").count() == len(data["cases"])
    images_loaded(page)
    check_accessibility(page)
    probe.screenshot("compare")
    probe.assert_clean()


def test_methodology_is_the_catalog(probe, server):
    from liberopro.catalog import SPECS as SHIFTS
    from liberopro.split import held_out

    probe.goto(f"{server}/leaderboard/methodology")
    page = probe.page
    shown = page.eval_on_selector_all("table.catalog tbody tr", "trs => trs.map(tr => tr.dataset.shift)")
    assert sorted(shown) == sorted(SHIFTS)
    for sid, cls in SHIFTS.items():
        row = page.locator(f"tr[data-shift='{sid}']")
        assert cls.name in row.inner_text() and cls.category in row.inner_text()
    split_rows = page.eval_on_selector_all(
        "#split-table tbody tr", "trs => trs.map(tr => [tr.children[0].textContent, tr.children[2].textContent])"
    )
    assert sorted((s, int(i)) for s, i in split_rows) == sorted((s, i) for s, ix in held_out().items() for i in ix)
    text = page.inner_text("main")
    assert "random.Random(142)" in text and "1000 replicates" in text and "mujoco" in text
    check_accessibility(page)
    probe.screenshot("methodology")
    probe.assert_clean()


def test_not_found_pages_say_why(probe, server, ids):
    for sid in ("000000000000", ids[HIDDEN_POLICY]):
        probe.goto(f"{server}/leaderboard/submissions/{sid}", expect_status=404)
        msg = probe.page.inner_text("p.error")
        assert sid in msg and "hidden" in msg
        assert HIDDEN_POLICY not in probe.page.content()
    check_accessibility(probe.page)
    probe.screenshot("not-found")
    # the documents' own 404s, nothing else
    probe.assert_clean(allow=("status of 404", f"HTTP 404: {server}/leaderboard/submissions/"))


def test_pages_work_without_javascript(browser, server, ids):
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1440, "height": 900})
    page = context.new_page()
    try:
        page.goto(f"{server}/leaderboard", wait_until="networkidle")
        page.click("th[data-sort-key='runtime_mean'] a")
        page.wait_for_load_state("networkidle")
        assert "sort=runtime_mean" in page.url
        assert page.locator("#ranking tbody tr[data-submission]").count() == 5
        for path in (f"/leaderboard/submissions/{ids['BC-RNN baseline']}", "/leaderboard/methodology"):
            page.goto(server + path, wait_until="networkidle")
            images_loaded(page)
        assert page.locator("table.catalog").count() == 2
    finally:
        context.close()


def test_narrow_screen(browser, server, ids):
    """A phone-sized viewport: the wide tables scroll inside their own box, the page does not."""
    context = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=2)
    page = context.new_page()
    try:
        for name, path in (
            ("leaderboard-narrow", "/leaderboard"),
            ("submission-narrow", f"/leaderboard/submissions/{ids['pi0-FAST']}"),
        ):
            page.goto(server + path, wait_until="networkidle")
            overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 1, f"{path} scrolls sideways by {overflow}px"
            page.screenshot(path=str(_shot(name)), full_page=False)
    finally:
        context.close()


def _shot(name: str):
    from tests.leaderboard.conftest import SCREENSHOTS

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS / f"{name}.png"


def test_palette_contrast_numerically():
    """The palette itself: page text pairs >= 4.5:1, chart marks >= 3:1 on white, and the heatmap's
    cell text >= 4.5:1 on every colour of its colormap."""
    from liberopro.report.palette import (
        CHART,
        CHART_MARKS,
        HEATMAP_CMAP,
        PAGE,
        TEXT_PAIRS,
        contrast,
        css_variables,
        text_on,
    )
    from matplotlib import colormaps

    for fg, bg in TEXT_PAIRS:
        assert contrast(PAGE[fg], PAGE[bg]) >= 4.5, (fg, bg, contrast(PAGE[fg], PAGE[bg]))
    for mark in CHART_MARKS:
        assert contrast(CHART[mark], "#ffffff") >= 3.0, (mark, contrast(CHART[mark], "#ffffff"))
    cmap = colormaps[HEATMAP_CMAP]
    worst = min(contrast(text_on(cmap(i / 255)), cmap(i / 255)) for i in range(256))
    assert worst >= 4.5, worst
    assert re.fullmatch(r"(--[a-z-]+: #[0-9a-fA-F]{6}; )+", css_variables() + " ")
