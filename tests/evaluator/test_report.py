"""``liberopro report`` and the study presets: synthetic run directories of two policies (real
``EpisodeRecord`` objects and the real ``summarize``, no simulator) give the study's tables with
the right numbers in report.md and report.html; pairing between policies refuses different
manifests, other instances and other seeds; the HTML is self-contained and renders in a real
headless Chromium (screenshot in ``build/screenshots/report/``)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from liberopro.metrics import paired_difference
from liberopro.report import ReportError, write_report
from liberopro.report.build import fmt_diff, fmt_rate
from liberopro.report.runs import find_runs, read_summary
from liberopro.runs.comparison import PairingError, compare_runs
from liberopro.schema.reasons import TerminationReason
from liberopro.schema.results import Summary
from typer.testing import CliRunner

from tests.evaluator.report_runs import RATES_A, RATES_B, header, policy_records, write_run

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Policy A (standard run and a replan-steps 2 run), policy B (standard run)."""
    base = tmp_path_factory.mktemp("runs")
    return {
        "a": write_run(base / "a", policy_records(RATES_A), header("policy-a")),
        "a-k2": write_run(
            base / "a-k2",
            policy_records({k: v / 2 for k, v in RATES_A.items()}, replan=2, diagnostics=False),
            header("policy-a", replan_override=2),
        ),
        "b": write_run(base / "b", policy_records(RATES_B), header("policy-b")),
    }


@pytest.fixture(scope="module")
def report(runs, tmp_path_factory) -> dict[str, Path]:
    return write_report([runs["a"], runs["a-k2"], runs["b"]], tmp_path_factory.mktemp("report"))


class _Tables(HTMLParser):
    """Every table of a page as {id: [[cell text, ...], ...]} (header row first)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.current: list[list[str]] | None = None
        self.cell: list[str] | None = None
        self.attrs: list[dict[str, str]] = []

    def handle_starttag(self, tag, attrs):
        self.attrs.append({"tag": tag, **{k: v or "" for k, v in attrs}})
        if tag == "table":
            self.current = self.tables.setdefault(dict(attrs)["id"], [])
        elif tag == "tr" and self.current is not None:
            self.current.append([])
        elif tag in ("td", "th") and self.current is not None:
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.current[-1].append("".join(self.cell).strip())
            self.cell = None
        elif tag == "table":
            self.current = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def _html_tables(path: Path) -> _Tables:
    parser = _Tables()
    parser.feed(path.read_text())
    return parser


def _md_tables(path: Path) -> list[list[list[str]]]:
    tables, current = [], None
    for line in path.read_text().splitlines():
        if line.startswith("|"):
            if current is None:
                current = []
                tables.append(current)
            if not re.fullmatch(r"\|(---\|)+", line):
                current.append([c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]])
        else:
            current = None
    return tables


def _row(table: list[list[str]], first: str) -> dict[str, str]:
    head = table[0]
    [row] = [r for r in table[1:] if r[0] == first]
    return dict(zip(head, row, strict=True))


def _summary(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


def test_report_of_two_policies_has_the_study_tables(runs, report):
    md, page = report["markdown"], report["html"]
    assert md.is_file() and page.is_file()
    text = md.read_text()
    for title in (
        "Overall landscape",
        "Per-shift success rates and paired drops from nominal",
        "Paired comparisons between policies",
        "Feedback utilisation: live versus frozen observations",
        "Closed-loop update frequency: replan-steps sweep",
        "Post-perturbation recovery: Hold, Retry, Restore",
        "Compositions and weakest-single gaps",
    ):
        assert f"## {title}" in text
    tables = _html_tables(page).tables
    a, b = read_summary(Summary.load(_summary(runs["a"]))), read_summary(Summary.load(_summary(runs["b"])))

    # the landscape: every headline number of each policy's summary, with interval and n
    head = tables["landscape-headline"]
    for label, view in (("policy-a", a), ("policy-b", b)):
        row = _row(head, label)
        assert (
            row["nominal"]
            == fmt_rate(view.metrics["nominal"])
            == ("100.0% [67.6, 100.0] n=8" if label == "policy-a" else "75.0% [40.9, 92.9] n=8")
        )
        assert row["static mean"] == fmt_rate(view.metrics["static_mean"])
        assert row["runtime mean"] == fmt_rate(view.metrics["runtime_mean"])
        assert re.fullmatch(r"\d+\.\d% \[\d+\.\d, \d+\.\d\] n=16, 2 cases", row["static mean"])
        assert _row(tables["landscape-runtime"], label)["Observation"] == fmt_rate(view.metrics["runtime.Observation"])

    # per shift: the rate and the drop from nominal already in summary.json
    shifts = tables["shift-rates"]
    s01 = _row(shifts, "S01 object pose")
    raw = next(c for c in _summary(runs["b"])["cases"] if c["case"] == "S01")
    assert s01["policy-b: success rate"] == "25.0% [7.1, 59.1] n=8"
    d = raw["drop_from_nominal"]
    assert (
        s01["policy-b: drop from nominal (paired)"]
        == f"+{100 * d['value']:.1f} pts [{100 * d['ci95'][0]:+.1f}, {100 * d['ci95'][1]:+.1f}] n=8 pairs"
    )

    # between policies: paired per case, recomputed here from the records
    pair = tables["pair-policy-a-policy-b-table"]
    recs_a = [json.loads(x) for x in (runs["a"] / "episodes.jsonl").read_text().splitlines()]
    recs_b = [json.loads(x) for x in (runs["b"] / "episodes.jsonl").read_text().splitlines()]

    def outcomes(recs, case):
        return {
            (f"{r['suite']}:{r['task_index']}", r["init_state_id"], r["seed"]): r["success"]
            for r in recs
            if r["case"] == case and r["observations"] == "live" and r["recovery"]["protocol"] == "none"
        }

    for case in ("nominal", "S12", "S01+D10"):
        want = paired_difference(outcomes(recs_a, case), outcomes(recs_b, case))
        got = _row(pair, case)["policy-a - policy-b"]
        assert (
            got == f"{100 * want['value']:+.1f} pts [{100 * want['ci95'][0]:+.1f}, {100 * want['ci95'][1]:+.1f}] "
            f"n={want['pairs']} pairs"
        )
    assert _row(pair, "S12")["policy-a - policy-b"].startswith("+50.0 pts")
    assert _row(pair, "mean over static single shifts")["policy-a - policy-b"].startswith("+37.5 pts")

    # live vs frozen, recovery, compositions: the summary's paired numbers
    assert _row(tables["frozen-policy-a-table"], "D10 observation freeze")["live - frozen (paired)"] == fmt_diff(
        a.frozen["D10"]
    )
    assert fmt_diff(a.frozen["D10"]).startswith("+75.0 pts")
    assert _row(tables["recovery-policy-b-mean"], "hold")["mean gain over none (paired)"].startswith("+100.0 pts")
    comp = _row(tables["compositions-policy-a-table"], "S01+D10")
    assert comp["gap SR(C) - min SR(c_i) (paired)"] == fmt_diff(a.compositions[0].gap)
    assert comp["gap SR(C) - min SR(c_i) (paired)"].startswith("-25.0 pts")
    assert comp["weakest constituent (paired SR)"] == "S01: 50.0% [21.5, 78.5] n=8"

    # the replan sweep: policy A at K=2 (override) and K=5 (its own)
    sweep = tables["replan-policy-a-table"]
    assert sweep[0] == ["case", "K=2", "K=5 (own)"]
    assert _row(sweep, "nominal") == {
        "case": "nominal",
        "K=2": "50.0% [21.5, 78.5] n=8",
        "K=5 (own)": "100.0% [67.6, 100.0] n=8",
    }

    # Markdown and HTML hold the same tables
    assert [t for t in _md_tables(md)] == [t for t in tables.values()]


def test_html_is_self_contained(report):
    page = report["html"].read_text()
    parser = _html_tables(report["html"])
    refs = [(a["tag"], k, v) for a in parser.attrs for k, v in a.items() if k in ("src", "href", "xlink:href")]
    assert not [r for r in refs if re.match(r"\s*(https?:)?//", r[2])], refs
    assert not [r for r in refs if r[1] == "src"], "nothing loaded by src"
    assert "<script" not in page and "<link" not in page and "@import" not in page and "url(http" not in page
    ids = [a["id"] for a in parser.attrs if "id" in a]
    assert len(ids) == len(set(ids)), "ids unique across the inline charts"
    figures = sorted(p.stem for p in report["figures"].glob("*.svg"))
    assert figures and sorted(a["id"] for a in parser.attrs if a["tag"] == "figure") == figures
    assert page.count("<svg") == len(figures)
    assert "<?xml" not in page and "<!DOCTYPE svg" not in page


def test_a_paired_comparison_of_runs_with_different_step_limits_says_so(tmp_path):
    """Pairing holds (same instances and seeds), but episodes cut at 60 steps against the suite
    horizon measure the limits too: the report says so beside the paired table (the demo's two
    runs, 60 and 220 steps, were compared without a word)."""
    runs_s = [
        write_run(tmp_path / "s1", policy_records(RATES_A), header("policy-a", max_steps=60)),
        write_run(tmp_path / "s2", policy_records(RATES_B), header("policy-b")),
    ]
    text = Path(write_report(runs_s, tmp_path / "out", charts=False)["markdown"]).read_text()
    assert "different step limits (policy-a: 60; policy-b: suite horizon)" in text
    same = [write_run(tmp_path / "t2", policy_records(RATES_B), header("policy-b", max_steps=60)), runs_s[0]]
    assert (
        "different step limits" not in Path(write_report(same, tmp_path / "out2", charts=False)["markdown"]).read_text()
    )


def test_pairing_refuses_different_manifests(runs, tmp_path):
    recs = {k: [json.loads(x) for x in (runs[k] / "episodes.jsonl").read_text().splitlines()] for k in ("a", "b")}
    from liberopro.runs.summary import EpisodeRecord

    a = [EpisodeRecord.model_validate(r) for r in recs["a"]]
    b = [EpisodeRecord.model_validate(r) for r in recs["b"]]
    with pytest.raises(PairingError, match="different manifests"):
        compare_runs(a, b, a_manifests=["1" * 64], b_manifests=["2" * 64])
    with pytest.raises(PairingError, match="different manifests"):
        compare_runs(a, b, a_manifests=["1" * 64], b_manifests=[None])
    assert compare_runs(a, b, a_manifests=["1" * 64], b_manifests=["1" * 64]).rows
    # without a manifest: other instances (shift parameters) or other seeds are refused too
    other = policy_records(RATES_B, instance_suffix="-seed7")
    with pytest.raises(PairingError, match="case nominal on libero_goal:0 ran instance"):
        compare_runs(a, other)
    with pytest.raises(PairingError, match="no episode of A starts like one of B"):
        compare_runs(a, policy_records(RATES_B, seed=100))
    # other tasks, same starts: the reason named is the tasks, not the starts
    elsewhere = [r.model_copy(update={"task_index": r.task_index + 5}) for r in policy_records(RATES_B)]
    with pytest.raises(PairingError, match=r"ran no task in common .*Run both on the same --tasks"):
        compare_runs(a, elsewhere)

    # the report says so in place of the paired table and still writes every other table
    runs_m = [
        write_run(tmp_path / "m1", policy_records(RATES_A), header("policy-a", manifest="1" * 64)),
        write_run(tmp_path / "m2", policy_records(RATES_B), header("policy-b", manifest="2" * 64)),
    ]
    paths = write_report(runs_m, tmp_path / "out", charts=False)
    text = paths["markdown"].read_text()
    assert (
        "Not paired: cannot pair policy-a (manifest 111111111111) with policy-b (manifest 222222222222): the "
        "runs evaluated different manifests" in text
    )
    assert "pair-policy-a-policy-b-table" not in paths["html"].read_text()
    assert "*Nominal and mean success rates per policy*" in text


def test_runs_of_one_policy_combine_and_refuse_duplicates(tmp_path):
    live = [r for r in policy_records(RATES_A) if r.observations == "live" and r.recovery["protocol"] == "none"]
    frozen = [r for r in policy_records(RATES_A) if r.observations == "frozen"]
    one = write_run(tmp_path / "live", live, header("policy-a"))
    two = write_run(tmp_path / "frozen", frozen, header("policy-a"))
    paths = write_report([one, two], tmp_path / "out", charts=False)
    tables = _html_tables(paths["html"]).tables
    assert _row(tables["frozen-policy-a-table"], "D10 observation freeze")["live - frozen (paired)"].startswith("+75.0")
    # an episode in two runs counts once, from the run given first, and the report says so
    again = write_run(
        tmp_path / "again", [r.model_copy(update={"success": False}) for r in live[:3]], header("policy-a")
    )
    text = write_report([one, again], tmp_path / "out2", charts=False)["markdown"].read_text()
    assert f"3 episode(s) of {again} were already in {one}" in text
    assert "| nominal | 100.0% [67.6, 100.0] n=8 |" in text, "the first run's outcomes"
    twice = write_run(tmp_path / "twice", live[:2] + live[:1], header("policy-a"))
    with pytest.raises(ReportError, match="holds episode nominal on libero_goal:0 .* twice"):
        write_report([one, twice], tmp_path / "out4", charts=False)
    # a case whose every episode was invalid says so (and why, in a note)
    invalid = [
        r.model_copy(
            update={
                "valid": False,
                "success": False,
                "termination_reason": TerminationReason.shift_invalid,  # model_copy does not validate
                "detail": "S12: lights out of range",
            }
        )
        if r.case == "S12"
        else r
        for r in live
    ]
    text = write_report([write_run(tmp_path / "inv", invalid, header("policy-a"))], tmp_path / "out5", charts=False)[
        "markdown"
    ]
    text = text.read_text()
    assert "| S12 lighting | no valid episode (8 invalid) | not paired |" in text
    assert "policy-a, S12: 8 invalid episode(s) (the shift could not be realised; in no rate): S12: lights out" in text
    # a different command is a different policy, even under the same name
    other = write_run(tmp_path / "other", live, header("policy-a", cmd="python other.py"))
    text = write_report([one, other], tmp_path / "out3", charts=False)["markdown"].read_text()
    assert "policy-a (command python serve_policy-a.py)" in text and "policy-a (command python other.py)" in text


def test_cli_report(runs, tmp_path):
    from liberopro.cli.main import app

    result = CliRunner().invoke(app, ["report", str(runs["b"]), "--out", str(tmp_path / "r"), "--no-charts"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r" / "report.html").is_file() and "wrote" in result.output
    assert (
        "<svg" not in (tmp_path / "r" / "report.html").read_text()
        and "## Overall landscape" in (tmp_path / "r" / "report.md").read_text()
    )
    assert "charts also in" not in result.output and not (tmp_path / "r" / "figures").exists()
    assert find_runs([runs["a"].parent]) == [runs["a"], runs["a-k2"], runs["b"]], "a directory of run directories"
    bad = CliRunner().invoke(app, ["report", str(tmp_path / "nothing-here"), "--out", str(tmp_path / "r2")])
    assert bad.exit_code == 2 and "nothing-here does not exist" in bad.output
    (tmp_path / "empty-run").mkdir()  # what a failed evaluate leaves
    bad = CliRunner().invoke(app, ["report", str(tmp_path / "empty-run"), "--out", str(tmp_path / "r2")])
    assert bad.exit_code == 2 and "is not a run directory" in bad.output
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "summary.json").write_text(json.dumps(_summary(runs["a"])))
    (broken / "episodes.jsonl").write_text('{"case": "nominal"}\n')
    bad = CliRunner().invoke(app, ["report", str(broken), "--out", str(tmp_path / "r3")])
    assert bad.exit_code == 2 and "no run could be read" in bad.output
    assert "episodes.jsonl:1 is not an episode record" in bad.output and not (tmp_path / "r3").exists()


def test_report_without_out_writes_one_folder_under_reports(runs, tmp_path, monkeypatch):
    """No --out: everything goes to reports/<timestamp> in the current folder, and the command
    says where; nothing else is written there."""
    from liberopro.cli.main import app

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["report", str(runs["b"]), "--no-charts"])
    assert result.exit_code == 0, result.output
    assert [p.name for p in tmp_path.iterdir()] == ["reports"]
    (made,) = (tmp_path / "reports").iterdir()
    assert re.fullmatch(r"\d{8}-\d{6}", made.name) and {p.name for p in made.iterdir()} == {"report.md", "report.html"}
    assert f"reports/{made.name}/report.md" in result.output


def test_report_of_a_folder_leaves_out_its_broken_runs_named(runs, tmp_path):
    """A parent folder with good runs and broken ones: the good ones are reported, each broken one
    is named with its reason on stderr and in the report, and the exit code is 0."""
    import shutil

    from liberopro.cli.main import app

    parent = tmp_path / "runs"
    shutil.copytree(runs["a"], parent / "a")
    shutil.copytree(runs["b"], parent / "b")
    (parent / "cut").mkdir()
    (parent / "cut" / "summary.json").write_text("{not json")
    shutil.copytree(runs["b"], parent / "no-episodes")
    (parent / "no-episodes" / "episodes.jsonl").unlink()
    result = CliRunner().invoke(app, ["report", str(parent), "--out", str(tmp_path / "r"), "--no-charts"])
    assert result.exit_code == 0, result.output
    left_out = [line for line in result.output.splitlines() if line.startswith("left out")]
    assert len(left_out) == 2, result.output
    assert "cut/summary.json: cannot be read" in left_out[0]
    assert "no-episodes/episodes.jsonl is missing" in left_out[1]
    text = (tmp_path / "r" / "report.md").read_text()
    assert "2 run(s) could not be read and are in no table" in text and "policy-a" in text and "policy-b" in text


def test_study_presets():
    from liberopro.catalog import SPECS
    from liberopro.catalog.compositions import conflict
    from liberopro.instances.build import parse_cases
    from liberopro.instances.study import PresetError, compositions, parse_replan_steps, preset_cases

    groups = compositions()
    for group, cases in groups.items():
        assert cases, group
        for case in cases:
            ids = case.split("+")
            assert conflict(ids) is None, case
            kinds = {i[0] for i in ids}
            size = {2: "pairs", 3: "triples"}[len(ids)]
            kind = (
                "static"
                if kinds == {"S"}
                else "runtime"
                if kinds == {"D"}
                else "static_runtime"
                if size == "pairs"
                else "mixed"
            )
            assert group == f"{kind}_{size}", case
    cases = parse_cases("nominal,@compositions,S01")
    assert cases[0] == [] and cases.count(["S01"]) == 1 and ["S01", "D01"] in cases and ["D07", "D15", "D19"] in cases
    constituents = {i for c in cases if len(c) > 1 for i in c}
    assert all([i] in cases for i in constituents), "every constituent runs as a single shift too"
    runtime = [sid for sid, spec in SPECS.items() if spec.kind == "runtime"]
    assert len(parse_cases("@all")) == 1 + len(SPECS) and preset_cases("runtime") == ["nominal", *runtime]
    with pytest.raises(PresetError, match="unknown preset @nope"):
        parse_cases("@nope")
    assert parse_replan_steps("@sweep") == [1, 2, 5, 10] and parse_replan_steps(None) == [None]
    assert parse_replan_steps("2,@sweep") == [2, 1, 5, 10]
    with pytest.raises(PresetError, match="not '0'"):
        parse_replan_steps("0")


def test_evaluate_rejects_bad_presets_before_anything_runs(tmp_path):
    from liberopro.cli.main import app

    base = ["evaluate", "--policy", "http://127.0.0.1:9", "--tasks", "libero_goal:1", "--out", str(tmp_path / "o")]
    bad = CliRunner().invoke(app, [*base, "--shifts", "nominal,@nope"])
    assert bad.exit_code == 2 and "unknown preset @nope" in bad.output
    bad = CliRunner().invoke(app, [*base, "--replan-steps", "2,0"])
    assert bad.exit_code == 2 and "--replan-steps takes integers >= 1 or @sweep, not '0'" in bad.output
    assert not (tmp_path / "o").exists()


def test_preset_file(tmp_path):
    from liberopro.instances.build import parse_cases

    f = tmp_path / "cases.txt"
    f.write_text("# my study\nnominal, S01\nS01+D10  # a pair\n")
    assert parse_cases(f"@{f}") == [[], ["S01"], ["S01", "D10"]]


def test_leaderboard_charts_import_without_the_web_stack():
    code = (
        "import sys, liberopro.report.charts, liberopro.report.build; "
        "bad = [m for m in ('fastapi', 'sqlalchemy', 'liberopro_platform', 'celery') if m in sys.modules]; "
        "assert not bad, bad; from liberopro_leaderboard import make_router; assert callable(make_router)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


@pytest.mark.browser  # real Chromium
def test_report_renders_in_chromium(report):
    """The page in a real headless Chromium: no request leaves the file, no console message, every
    chart drawn with a size, basic accessibility; a screenshot for the record."""
    from playwright.sync_api import sync_playwright

    from tests.leaderboard.conftest import CHROMIUM_ARGS, CHROMIUM_CANDIDATES
    from tests.leaderboard.test_browser import A11Y_JS

    chromium = next(p for p in CHROMIUM_CANDIDATES if Path(p).exists())
    shots = REPO / "build" / "screenshots" / "report"
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            requests, messages = [], []
            page.on("request", lambda r: requests.append(r.url))
            page.on("console", lambda m: messages.append(m.text))
            page.goto(report["html"].resolve().as_uri())
            assert [u for u in requests if not u.startswith("file://")] == [] and len(requests) == 1
            assert messages == []
            sizes = page.evaluate(
                "[...document.querySelectorAll('figure svg')].map(s => s.getBoundingClientRect())"
                ".map(r => [r.width, r.height])"
            )
            assert sizes and all(w > 200 and h > 100 for w, h in sizes), sizes
            assert page.evaluate(A11Y_JS) == []
            page.screenshot(path=str(shots / "report.png"), full_page=True)
        finally:
            browser.close()
